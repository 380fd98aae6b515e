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
import zlib
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import httptools
import yarl
from multidict import CIMultiDict, CIMultiDictProxy

HIGH_WATER = 256 * 1024  # buffered answer bytes at which reading from the socket pauses
INFLATE_STEP = 256 * 1024  # most bytes one step of inflating a compressed answer may produce


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
        self.reused = False

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


class H1Response:
    """One upstream answer (the aiohttp ``ClientResponse`` subset the proxy reads)."""

    __slots__ = (
        "loop",
        "conn",
        "pool",
        "key",
        "status",
        "headers",
        "raw_headers",
        "keep_alive",
        "chunks",
        "buffered",
        "paused",
        "done",
        "error",
        "waiter",
        "head_waiter",
        "inflate",
        "pending",
        "ended",
        "timer",
        "deadline",
        "idle",
        "last_data",
        "until_close",
        "got_bytes",
    )

    def __init__(
        self, pool: H1Pool, key: Any, conn: _Conn, deadline: float | None, idle: float | None
    ) -> None:
        self.loop = pool.loop
        self.pool = pool
        self.key = key
        self.conn: _Conn | None = conn
        self.status = 0
        self.headers: CIMultiDictProxy[str] = _EMPTY
        self.raw_headers: list[tuple[str, str]] = []
        self.keep_alive = False
        self.chunks: collections.deque[bytes] = collections.deque()
        self.buffered = 0
        self.paused = False
        self.done = False  # the whole body is in ``chunks``
        self.error: BaseException | None = None
        self.waiter: asyncio.Future[None] | None = None
        self.head_waiter: asyncio.Future[None] | None = self.loop.create_future()
        self.inflate: Any = None
        self.pending = b""  # compressed bytes not inflated yet (a step is at most INFLATE_STEP)
        self.ended = False  # the message is complete on the wire (``done``: and all inflated)
        self.timer: asyncio.TimerHandle | None = None
        self.deadline = deadline
        self.idle = idle
        self.last_data = self.loop.time()
        self.until_close = False
        self.got_bytes = False
        if deadline is not None or idle is not None:
            self._arm()

    # -- the parser's side -----------------------------------------------------------------
    def head_done(self, status: int, keep_alive: bool) -> None:
        if self.done:  # a second answer in the same packet: never reuse this connection
            self._drop_conn()
            return
        self.got_bytes = True
        if 100 <= status < 200:  # an interim answer (100 Continue): the real one follows
            self.raw_headers = []
            return
        self.status = status
        self.keep_alive = keep_alive
        headers = CIMultiDict(self.raw_headers)
        self.headers = CIMultiDictProxy(headers)
        encoding = headers.get("Content-Encoding", "").strip().lower()
        if encoding in ("gzip", "x-gzip"):
            self.inflate = zlib.decompressobj(wbits=47)
        elif encoding == "deflate":
            self.inflate = _Deflate()
        self.until_close = (
            "Content-Length" not in headers and "chunked" not in headers.get("Transfer-Encoding", "").lower()
        )
        waiter = self.head_waiter
        if waiter is not None:
            self.head_waiter = None
            if not waiter.done():
                waiter.set_result(None)

    def feed(self, data: bytes) -> None:
        if self.status == 0 or self.done:  # an interim answer's body (none in practice)
            return
        if self.inflate is not None:
            if self.pending:  # inflating is behind: keep the compressed bytes in order
                self.pending += data
                return
            data = self._inflate(data)
            if not data:
                return
        self.chunks.append(data)
        self.buffered += len(data)
        if (self.buffered > HIGH_WATER or self.pending) and not self.paused and self.conn is not None:
            self.paused = True
            self.conn.transport.pause_reading()  # type: ignore[union-attr]
        self._wake()

    def _inflate(self, data: bytes) -> bytes:
        """One bounded step: a small compressed answer may inflate a thousandfold (issue 13's
        bomb), so the rest waits, compressed, until the reader has taken this step's bytes."""
        try:
            out = self.inflate.decompress(data, INFLATE_STEP)
        except zlib.error as exc:
            self.fail(aiohttp.ClientPayloadError(f"cannot inflate the upstream's body: {exc}"))
            self._drop_conn()
            return b""
        self.pending = self.inflate.unconsumed_tail
        return out

    def complete(self) -> None:
        if self.status == 0 or self.done:  # the interim answer ended
            return
        self.ended = True
        if not self.pending:
            self._finish()

    def _finish(self) -> None:
        if self.inflate is not None:
            tail = self.inflate.flush()
            if tail:
                self.chunks.append(tail)
                self.buffered += len(tail)
        self.done = True
        self._cancel_timer()
        self._wake()

    def lost(self, exc: Exception | None) -> None:
        self.conn = None
        if self.done:
            return
        if self.status and self.until_close and exc is None:  # a body delimited by the close
            self.complete()
            return
        if self.got_bytes:
            err: BaseException = aiohttp.ClientPayloadError("the upstream closed the connection mid-answer")
        else:
            err = aiohttp.ServerDisconnectedError()
        if exc is not None:
            err.__cause__ = exc
        self.fail(err)

    def fail(self, exc: BaseException) -> None:
        if self.error is None and not self.done:
            self.error = exc
        self._cancel_timer()
        waiter = self.head_waiter
        if waiter is not None:
            self.head_waiter = None
            if not waiter.done():
                waiter.set_exception(exc)
        self._wake()

    def _wake(self) -> None:
        waiter = self.waiter
        if waiter is not None:
            self.waiter = None
            if not waiter.done():
                waiter.set_result(None)

    # -- the timer: the total deadline and the idle read timeout in one handle ----------------
    def _arm(self) -> None:
        when = self.deadline
        if self.idle is not None:
            idle_at = self.last_data + self.idle
            when = idle_at if when is None else min(when, idle_at)
        self.timer = self.loop.call_at(when, self._on_timer)  # type: ignore[arg-type]

    def _on_timer(self) -> None:
        self.timer = None
        if self.done or self.error is not None:
            return
        now = self.loop.time()
        if self.deadline is not None and now >= self.deadline:
            self.fail(TimeoutError())
        elif (
            self.idle is not None
            and now >= self.last_data + self.idle
            and (self.head_waiter is not None or self.waiter is not None)
        ):
            self.fail(aiohttp.SocketTimeoutError("Timeout on reading data from socket"))
        else:
            if self.idle is not None and self.head_waiter is None and self.waiter is None:
                self.last_data = now  # nobody is waiting: a slow reader is not an idle upstream
            self._arm()
            return
        self._drop_conn()

    def _cancel_timer(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    # -- the caller's side: aiohttp's ClientResponse subset ------------------------------------
    @property
    def content_type(self) -> str:
        raw = self.headers.get("Content-Type")
        if not raw:
            return "application/octet-stream"
        return raw.partition(";")[0].strip().lower()

    @property
    def content_length(self) -> int | None:
        raw = self.headers.get("Content-Length")
        try:
            return int(raw) if raw is not None else None
        except ValueError:
            return None

    @property
    def content(self) -> H1Response:
        return self

    def iter_any(self) -> H1Response:
        return self

    def __aiter__(self) -> H1Response:
        return self

    async def __anext__(self) -> bytes:
        chunks = self.chunks
        while not chunks:
            if self.error is not None:
                raise self.error
            if self.done:
                raise StopAsyncIteration
            if self.pending:
                out = self._inflate(self.pending)
                if out:
                    chunks.append(out)
                if not self.pending and self.ended:
                    self._finish()
                continue
            self.waiter = self.loop.create_future()
            await self.waiter
        # everything buffered, as aiohttp's ``iter_any``: fewer, larger pieces for the caller
        chunk = chunks.popleft() if len(chunks) == 1 else b"".join(chunks)
        chunks.clear()
        self.buffered = 0
        if self.paused and not self.pending:
            self.paused = False
            if self.conn is not None:
                self.conn.transport.resume_reading()  # type: ignore[union-attr]
        return chunk

    async def read(self, limit: int = -1) -> bytes:
        """The whole body (or at most ``limit`` bytes of it)."""
        if self.done and len(self.chunks) == 1 and limit < 0:
            chunk = self.chunks.popleft()
            self.buffered = 0
            return chunk
        out = []
        size = 0
        async for chunk in self:
            out.append(chunk)
            size += len(chunk)
            if 0 <= limit <= size:
                break
        data = b"".join(out)
        if 0 <= limit < len(data):
            self.chunks.appendleft(data[limit:])
            self.buffered += len(data) - limit
            data = data[:limit]
        return data

    def release(self) -> None:
        """Back to the pool when the answer was read to its end on a keep-alive connection;
        closed otherwise (an unread body cannot be skipped safely)."""
        self._cancel_timer()
        conn = self.conn
        if conn is None:
            return
        self.conn = None
        conn.resp = None
        if self.done and self.keep_alive and not conn.closed:
            if self.paused:
                conn.transport.resume_reading()  # type: ignore[union-attr]
            self.pool.put(self.key, conn)
        else:
            conn.close()

    def close(self) -> None:
        self._cancel_timer()
        self._drop_conn()

    def _drop_conn(self) -> None:
        conn = self.conn
        if conn is not None:
            self.conn = None
            conn.resp = None
            conn.close()

    async def __aenter__(self) -> H1Response:
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        self.release()


_EMPTY: CIMultiDictProxy[str] = CIMultiDictProxy(CIMultiDict())


class _Deflate:
    """``Content-Encoding: deflate`` is zlib-wrapped by the standard, raw in some servers."""

    def __init__(self) -> None:
        self._inner: Any = None

    def decompress(self, data: bytes, max_length: int = 0) -> bytes:
        if self._inner is None:
            raw = bool(data) and (data[0] & 0x0F) != 8  # a zlib stream starts with method 8
            self._inner = zlib.decompressobj(-zlib.MAX_WBITS if raw else zlib.MAX_WBITS)
        return self._inner.decompress(data, max_length)

    @property
    def unconsumed_tail(self) -> bytes:
        return self._inner.unconsumed_tail if self._inner is not None else b""

    def flush(self) -> bytes:
        return self._inner.flush() if self._inner is not None else b""


class H1Pool:
    """Keep-alive connections per (scheme, host, port), most recently used first."""

    def __init__(
        self, resolve: Callable[[str, int], Awaitable[list[dict[str, Any]]]], keepalive: float = 60.0
    ) -> None:
        self.loop = asyncio.get_running_loop()
        self.resolve = resolve
        self.keepalive = keepalive
        self.idle: dict[Any, list[_Conn]] = {}

    def put(self, key: Any, conn: _Conn) -> None:
        conn.idle_since = self.loop.time()
        conn.reused = True
        self.idle.setdefault(key, []).append(conn)

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
