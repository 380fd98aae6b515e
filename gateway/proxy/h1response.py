"""The lean upstream client's answer (``gateway.proxy.h1client``): what the parser gives, as the
part of aiohttp's ``ClientResponse`` the proxy reads, with back-pressure, bounded inflating
and the request's one timer."""

from __future__ import annotations

import asyncio
import collections
import zlib
from typing import TYPE_CHECKING, Any

import aiohttp
from multidict import CIMultiDict, CIMultiDictProxy

if TYPE_CHECKING:
    from .h1client import H1Pool, _Conn

HIGH_WATER = 256 * 1024  # buffered answer bytes at which reading from the socket pauses
INFLATE_STEP = 256 * 1024  # most bytes one step of inflating a compressed answer may produce


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
        transport = conn.transport
        # an answer that came before the whole request went out (an early 413) leaves the rest
        # of the body queued: the upstream would read it as the next request, so close
        if self.done and self.keep_alive and not conn.closed and not transport.get_write_buffer_size():  # type: ignore[union-attr]
            if self.paused:
                transport.resume_reading()  # type: ignore[union-attr]
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
