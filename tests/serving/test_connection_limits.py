"""Issue 13: client connections that never send a request head, or dribble a body, are closed;
connections past the per-worker cap are refused and logged. Served by real uvicorn with the
production protocol (``gateway.serving``) on a trivial app."""

from __future__ import annotations

import asyncio
import logging
import socket
import time

import pytest

from gateway import serving
from tests.servers import ThreadedUvicorn, free_port


async def hello(scope, receive, send):
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    while True:
        message = await receive()
        if message["type"] == "http.disconnect" or not message.get("more_body"):
            break
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"ok"})


@pytest.fixture
def server(monkeypatch):
    def start(header: float, body: float, cap: int, keep_alive: int = 5, app=hello) -> int:
        monkeypatch.setattr(serving, "_limits", serving.ConnectionLimits(header, body, cap))
        monkeypatch.setattr(serving, "_shed", {"count": 0, "logged_at": 0.0})
        port = free_port()
        srv = ThreadedUvicorn(
            app, port, "guarded", http=serving.GuardedHttpToolsProtocol, timeout_keep_alive=keep_alive
        )
        srv.start()
        started.append(srv)
        return port

    started: list[ThreadedUvicorn] = []
    yield start
    for srv in started:
        srv.stop()


def _closed_within(sock: socket.socket, seconds: float) -> bool:
    sock.settimeout(seconds)
    try:
        while True:
            data = sock.recv(4096)
            if not data:
                return True
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True


def _response(sock: socket.socket) -> bytes:
    sock.settimeout(5)
    data = b""
    while not data.endswith(b"ok"):
        chunk = sock.recv(4096)
        if not chunk:
            break
        data += chunk
    return data


def _connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=5)


def test_silent_and_slow_clients_are_closed_and_normal_ones_served(server):
    port = server(0.5, 0.5, 0)
    silent = _connect(port)
    partial = _connect(port)
    partial.sendall(b"POST / HTTP/1.1\r\nHost: x\r\n")
    dribble = _connect(port)
    dribble.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n0123456789")
    assert _closed_within(silent, 5) and _closed_within(partial, 5) and _closed_within(dribble, 5)
    ok = _connect(port)
    ok.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    assert _response(ok).startswith(b"HTTP/1.1 200")
    time.sleep(1.0)  # the header timer was disarmed: a finished request is not cut by it
    ok.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    assert _response(ok).startswith(b"HTTP/1.1 200")
    for s in (silent, partial, dribble, ok):
        s.close()


def test_an_idle_kept_alive_connection_is_closed_after_the_keep_alive_timeout_quietly(server, caplog):
    """The keep-alive timeout is a deadline the server's sweep checks (no timer per request): an
    idle connection goes after it, without the log line of a client that was too slow."""
    port = server(30, 30, 0, keep_alive=1)
    conn = _connect(port)
    with caplog.at_level(logging.INFO, logger="gateway.serving"):
        conn.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        assert _response(conn).startswith(b"HTTP/1.1 200")
        assert not _closed_within(conn, 0.6)  # kept alive for a while
        assert _closed_within(conn, 5)
    assert not any("in time" in r.getMessage() for r in caplog.records)
    conn.close()


def test_a_request_the_app_is_still_answering_is_not_cut_by_any_timeout(server):
    """Once its request is complete, nothing is due from the client until the answer is sent:
    neither the header, the body nor the keep-alive timeout closes the connection meanwhile."""

    async def slow(scope, receive, send):
        if scope["type"] == "lifespan":
            await hello(scope, receive, send)
            return
        await receive()
        await asyncio.sleep(1.5)
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
        await send({"type": "http.response.body", "body": b"ok"})

    port = server(0.3, 0.3, 0, keep_alive=1, app=slow)
    conn = _connect(port)
    for _ in range(2):  # the second request comes on the kept-alive connection
        conn.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        assert _response(conn).startswith(b"HTTP/1.1 200")
    conn.close()


def test_connections_past_the_cap_are_shed_with_a_log_line(server, caplog):
    port = server(30, 30, 3)
    held = [_connect(port) for _ in range(3)]
    time.sleep(0.3)
    with caplog.at_level(logging.WARNING, logger="gateway.serving"):
        extra = _connect(port)
        assert _closed_within(extra, 5)
    assert any("shedding connections" in r.getMessage() for r in caplog.records)
    for s in held:
        assert not _closed_within(s, 0.2)  # the ones within the cap stay open
        s.close()


def test_the_heap_is_trimmed_once_a_burst_of_connections_has_gone(server, monkeypatch):
    """glibc keeps freed memory for reuse: RSS stayed 10-15 MiB above idle after 2,000 connections
    came and went (issue 13). When a burst has gone, the worker gives the freed heap back."""
    calls: list[int] = []
    monkeypatch.setattr(serving, "trim_heap", lambda: calls.append(0) or True)
    monkeypatch.setattr(serving, "_heap", {"peak": 0, "pending": None, "trims": 0})
    monkeypatch.setattr(serving, "TRIM_AFTER_PEAK", 8)
    monkeypatch.setattr(serving, "TRIM_DELAY", 0.1)
    port = server(30, 30, 0)
    few = [_connect(port) for _ in range(4)]  # below the burst size: no trim when they go
    time.sleep(0.3)
    for s in few:
        s.close()
    time.sleep(0.5)
    assert calls == []
    burst = [_connect(port) for _ in range(12)]
    time.sleep(0.3)
    for s in burst:
        s.close()
    deadline = time.monotonic() + 5
    while not calls and time.monotonic() < deadline:
        time.sleep(0.05)
    assert calls == [0]
