"""Issue 20: ``python -m gateway.launch`` (what ``make run`` starts) gives every worker its own
SO_REUSEPORT socket, so connections are spread over the workers, stops cleanly on SIGTERM, and
stops at once when a worker cannot start. Real processes on a real port; the app is a trivial
ASGI app that answers its worker's pid."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.servers import free_port

ROOT = Path(__file__).resolve().parent.parent.parent
pytestmark = pytest.mark.e2e


async def pid_app(scope, receive, send):
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    body = str(os.getpid()).encode()
    await send(
        {"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"%d" % len(body))]}
    )
    await send({"type": "http.response.body", "body": body})


async def client_app(scope, receive, send):
    """Answers the client address the server put in the scope."""
    if scope["type"] == "lifespan":
        await pid_app(scope, receive, send)
        return
    body = scope["client"][0].encode()
    await send(
        {"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"%d" % len(body))]}
    )
    await send({"type": "http.response.body", "body": body})


def _launch(app: str, port: int, workers: int) -> subprocess.Popen:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gateway.launch",
            "--app",
            app,
            "--port",
            str(port),
            "--workers",
            str(workers),
            "--log-level",
            "warning",
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )


def _ask(port: int) -> int | None:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as sock:
            sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            data = b""
            while chunk := sock.recv(4096):
                data += chunk
    except OSError:
        return None
    return int(data.rsplit(b"\r\n\r\n", 1)[1]) if data.startswith(b"HTTP/1.1 200") else None


def _wait_workers(port: int, workers: int, timeout: float = 40) -> None:
    """Until ``workers`` distinct pids answered (each worker binds its socket when it is up)."""
    seen: set[int] = set()
    deadline = time.monotonic() + timeout
    while len(seen) < workers and time.monotonic() < deadline:
        pid = _ask(port)
        if pid is None:
            time.sleep(0.2)
        else:
            seen.add(pid)
    assert len(seen) == workers, f"only {len(seen)} of {workers} workers answered"


def test_connections_spread_over_workers_and_sigterm_stops_them():
    port = free_port()
    proc = _launch("tests.serving.test_launch:pid_app", port, 2)
    try:
        _wait_workers(port, 2)
        # 60 fresh connections (new source ports): the kernel hashes each to one worker's socket.
        split = Counter(_ask(port) for _ in range(60))
        assert None not in split and len(split) == 2, split
        assert min(split.values()) >= 12, f"uneven split {dict(split)}"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
        assert _ask(port) is None  # no worker left listening
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_worker_that_cannot_start_stops_the_server():
    proc = _launch("tests.serving.no_such_module:app", free_port(), 2)
    try:
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode != 0
    assert b"failed to start" in out


def test_the_scope_client_is_the_peer_whatever_x_forwarded_for_says():
    """uvicorn's X-Forwarded-For rewrite is off: it trusts loopback whatever
    GATEWAY_TRUSTED_PROXY_CIDRS says, and the gateway reads the header itself."""
    port = free_port()
    proc = _launch("tests.serving.test_launch:client_app", port, 1)
    try:
        deadline = time.monotonic() + 40
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=2) as sock:
                    sock.sendall(
                        b"GET / HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: 203.0.113.8\r\nConnection: close\r\n\r\n"
                    )
                    data = b""
                    while chunk := sock.recv(4096):
                        data += chunk
                break
            except OSError:
                assert time.monotonic() < deadline, "the server did not start"
                time.sleep(0.2)
        assert data.startswith(b"HTTP/1.1 200") and data.rsplit(b"\r\n\r\n", 1)[1] == b"127.0.0.1"
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
