"""A lean HTTP/1.1 client for the upstream POST: keep-alive pool, httptools parser, one timer.

Why not aiohttp on the hot path: profiled under load, aiohttp's request and response machinery
(the request object, its header multidicts, the writer, the payload stream, the timer contexts)
was about a quarter of a worker's CPU per proxied request (bench/HOTPATH.md). The gateway only
ever POSTs a body it already holds and reads one answer, so this client does exactly that: the
request head is formatted in one f-string and written with the body in one ``writelines``; the
answer is parsed by httptools (llhttp, what uvicorn parses requests with) straight into a
``CIMultiDict`` and a chunk queue; a request has at most one timer handle, which covers the
total deadline and the idle read timeout together.

The response object answers the part of aiohttp's ``ClientResponse`` the proxy uses (``status``,
``headers``, ``content_type``, ``content_length``, ``read()``, ``content.iter_any()``,
``content.read(n)``, ``release()``, ``close()``, ``async with``), and failures are aiohttp's
exception classes (``ServerDisconnectedError``, ``ConnectionTimeoutError``, ...) or ``OSError``
and ``TimeoutError``, so error handling and diagnostics are the same whichever client runs
(``GATEWAY_UPSTREAM_CLIENT=aiohttp`` selects aiohttp's). No proxies, redirects or cookies: the
upstream POST uses none.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import ssl
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import httptools
import yarl

from .h1response import H1Response


class BadRequestHead(aiohttp.ClientError):
    """A header name or value the request head cannot carry (a newline: header injection)."""


class ResponseParseError(aiohttp.ClientResponseError):
    """The upstream's bytes are not HTTP/1.1."""

    def __init__(self, message: str) -> None:
        super().__init__(None, (), message=message)  # type: ignore[arg-type]


@functools.lru_cache(maxsize=1024)
def _target(url: str) -> tuple[tuple[str, str, int], str, str, bool]:
    """((scheme, host, port) pool key, request target, Host header, TLS) of a channel URL,
    parsed once. A URL yarl cannot parse raises ``aiohttp.InvalidUrlClientError`` like aiohttp."""
    try:
        u = yarl.URL(url)
    except ValueError:
        raise aiohttp.InvalidUrlClientError(url) from None
    if u.scheme not in ("http", "https") or not u.raw_host:
        raise aiohttp.InvalidUrlClientError(url)
    host = u.raw_host
    port = u.port or (443 if u.scheme == "https" else 80)
    shown = f"[{host}]" if ":" in host else host
    host_header = shown if u.is_default_port() else f"{shown}:{port}"
    path = u.raw_path_qs or "/"
    return (u.scheme, host, port), path, host_header, u.scheme == "https"


@functools.lru_cache(maxsize=1)
def _tls_context() -> ssl.SSLContext:
    ctx = ssl.create_default_context()
    ctx.set_alpn_protocols(["http/1.1"])
    return ctx


def _head(path: str, host_header: str, headers: dict[str, str], length: int) -> bytes:
    """The request head. The caller's Host and Content-Length win; Accept and Accept-Encoding
    default as aiohttp's did (the answer is inflated here); no User-Agent of the gateway's own."""
    lines = [f"POST {path} HTTP/1.1\r\n"]
    seen = 0
    for name, value in headers.items():
        if "\n" in value or "\r" in value or "\n" in name or "\r" in name or ":" in name:
            raise BadRequestHead(f"header {name!r} cannot be sent: newline or colon in it")
        low = name.lower()
        if low in _DEFAULTED:
            seen |= _DEFAULTED[low]
        lines.append(f"{name}: {value}\r\n")
    if not seen & 1:
        lines.append(f"Host: {host_header}\r\n")
    if not seen & 2:
        lines.append(f"Content-Length: {length}\r\n")
    if not seen & 4:
        lines.append("Accept: */*\r\n")
    if not seen & 8:
        lines.append("Accept-Encoding: gzip, deflate\r\n")
    lines.append("\r\n")
    return "".join(lines).encode("utf-8")


_DEFAULTED = {"host": 1, "content-length": 2, "accept": 4, "accept-encoding": 8}


class _Conn(asyncio.Protocol):
    """One pooled connection; the httptools parser's callbacks land here and go to the
    response in flight."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.resp: H1Response | None = None
        self.closed = False
        self.idle_since = 0.0

    # -- asyncio.Protocol ------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        resp = self.resp
        if resp is None or resp.done:  # bytes past the answer: the connection cannot be reused
            self.close()
            return
        resp.last_data = resp.loop.time()
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            resp.fail(ResponseParseError(f"invalid HTTP response from upstream: {exc}"))
            self.close()

    def eof_received(self) -> None:
        return None  # close the transport: connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        resp = self.resp
        if resp is not None:
            resp.lost(exc)

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    # -- httptools callbacks ---------------------------------------------------------------
    def on_header(self, name: bytes, value: bytes) -> None:
        self.resp.raw_headers.append(  # type: ignore[union-attr]
            (name.decode("latin-1"), value.decode("utf-8", "surrogateescape"))
        )

    def on_headers_complete(self) -> None:
        self.resp.head_done(self.parser.get_status_code(), self.parser.should_keep_alive())  # type: ignore[union-attr]

    def on_body(self, body: bytes) -> None:
        self.resp.feed(body)  # type: ignore[union-attr]

    def on_message_complete(self) -> None:
        self.resp.complete()  # type: ignore[union-attr]


# Idle connections kept per upstream host and worker (nginx's ``keepalive`` directive, Go's
# ``MaxIdleConnsPerHost``): a burst of 1,000 streams no longer leaves 1,000 sockets and their
# buffers open for the keep-alive time after it; steady traffic reuses far fewer than this.
MAX_IDLE_PER_HOST = 128


class H1Pool:
    """Keep-alive connections per (scheme, host, port), most recently used first."""

    def __init__(
        self, resolve: Callable[[str, int], Awaitable[list[dict[str, Any]]]], keepalive: float = 60.0
    ) -> None:
        self.loop = asyncio.get_running_loop()
        self.resolve = resolve
        self.keepalive = keepalive
        self.idle: dict[Any, collections.deque[_Conn]] = {}
        self.sweep: asyncio.TimerHandle | None = None

    def put(self, key: Any, conn: _Conn) -> None:
        conn.idle_since = self.loop.time()
        conns = self.idle.get(key)
        if conns is None:
            conns = self.idle[key] = collections.deque()
        elif len(conns) >= MAX_IDLE_PER_HOST:
            conns.popleft().close()  # the longest idle goes
        conns.append(conn)
        if self.sweep is None:
            self.sweep = self.loop.call_later(self.keepalive / 2, self._sweep)

    def _sweep(self) -> None:
        """Close connections idle longer than ``keepalive`` (a burst's connections do not stay
        open for ever once the traffic is gone); one timer per pool while any are pooled."""
        self.sweep = None
        oldest = self.loop.time() - self.keepalive
        for key, conns in list(self.idle.items()):
            keep: collections.deque[_Conn] = collections.deque()
            for conn in conns:
                if conn.closed or conn.idle_since <= oldest:
                    conn.close()
                else:
                    keep.append(conn)
            if keep:
                self.idle[key] = keep
            else:
                del self.idle[key]
        if self.idle:
            self.sweep = self.loop.call_later(self.keepalive / 2, self._sweep)

    def take(self, key: Any) -> _Conn | None:
        conns = self.idle.get(key)
        if not conns:
            return None
        oldest = self.loop.time() - self.keepalive
        while conns:
            conn = conns.pop()
            if not conn.closed and conn.idle_since > oldest and not conn.transport.is_closing():  # type: ignore[union-attr]
                return conn
            conn.close()
        return None

    async def connect(self, key: tuple[str, str, int], tls: bool, timeout: float | None) -> _Conn:
        _, host, port = key
        try:
            async with asyncio.timeout(timeout):
                return await self._open(host, port, tls)
        except TimeoutError:
            raise aiohttp.ConnectionTimeoutError(f"Connection timeout to host {host}:{port}") from None

    async def _open(self, host: str, port: int, tls: bool) -> _Conn:
        addresses = [host] if _is_ip(host) else [info["host"] for info in await self.resolve(host, port)]
        last: OSError | None = None
        for address in addresses:
            try:
                _, conn = await self.loop.create_connection(
                    _Conn,
                    address,
                    port,
                    ssl=_tls_context() if tls else None,
                    server_hostname=host if tls else None,
                )
                return conn
            except OSError as exc:
                last = exc
        raise last if last is not None else OSError(f"no address for {host}")

    def close(self) -> None:
        if self.sweep is not None:
            self.sweep.cancel()
            self.sweep = None
        for conns in self.idle.values():
            for conn in conns:
                conn.close()
        self.idle.clear()


@functools.lru_cache(maxsize=256)
def _is_ip(host: str) -> bool:
    import ipaddress

    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


async def post(
    pool: H1Pool,
    url: str,
    body: bytes,
    headers: dict[str, str],
    total: float | None,
    connect: float | None,
    sock_read: float | None,
) -> H1Response:
    """POST ``body`` and wait for the answer's head. A pooled connection found closed as the
    request was about to go is replaced by a fresh one (nothing had been sent on it)."""
    key, path, host_header, tls = _target(url)
    head = _head(path, host_header, headers, len(body))
    loop = pool.loop
    deadline = loop.time() + total if total else None
    conn = pool.take(key)
    if conn is None:
        conn = await pool.connect(key, tls, _connect_budget(connect, deadline, loop))
    resp = H1Response(pool, key, conn, deadline, sock_read)
    conn.resp = resp
    conn.transport.writelines((head, body))  # type: ignore[union-attr]
    try:
        if resp.head_waiter is not None:
            await resp.head_waiter
    except BaseException:
        resp.close()
        raise
    return resp


def _connect_budget(
    connect: float | None, deadline: float | None, loop: asyncio.AbstractEventLoop
) -> float | None:
    if deadline is None:
        return connect
    left = max(deadline - loop.time(), 0.0)
    return left if connect is None else min(connect, left)
