"""Per-request state and response writing for the proxy: status line and headers (request id,
gateway overhead), JSON answers, and an SSE writer that several tasks (the stream itself and
its keep-alive) can share."""

from __future__ import annotations

import asyncio
import itertools
import os
import time
from collections.abc import Awaitable, Callable
from typing import Any

import orjson

from .errors import ClientError, error_bytes
from .recorder import NULL_RECORDER, Recorder, hook_of

JSON_CT = b"application/json"
SSE_HEADERS = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]
_WANTED = {
    b"authorization": "authorization",
    b"x-api-key": "x-api-key",
    b"x-request-id": "x-request-id",
    b"content-length": "content-length",
    b"anthropic-beta": "anthropic-beta",
    b"content-type": "content-type",
    b"x-goog-api-key": "x-goog-api-key",
    b"x-monogate-hop": "x-monogate-hop",  # the loop guard (loopguard.HOP_HEADER)
    b"x-forwarded-for": "x-forwarded-for",  # the client behind a trusted proxy (limits.client_ip)
    b"x-real-ip": "x-real-ip",
}


class ClientGone(Exception):
    """The client disconnected while we were reading its body."""


def read_headers(scope) -> dict[str, str]:
    """Only the request headers the proxy looks at (names are lower-case in ASGI). The client's
    other headers are never forwarded upstream."""
    out: dict[str, str] = {}
    for name, value in scope["headers"]:
        key = _WANTED.get(name)
        if key is not None:
            out[key] = value.decode("latin-1")
    return out


def client_request_id_from(headers: dict[str, str]) -> str | None:
    """The client's ``x-request-id`` when it is a sane token, else None (kept as data only)."""
    rid = headers.get("x-request-id", "").strip()
    if 0 < len(rid) <= 128 and rid.isascii() and rid.isprintable() and " " not in rid:
        return rid
    return None


_ID_VERSION = 0x4000  # uuid4's version nibble, in the high 64 bits (byte 6)
_ID_VARIANT = 1 << 63  # RFC 4122 variant bits (0b10), in the low 64 bits (byte 8)
_id_base = 0
_id_counter = itertools.count()


def _reseed_request_ids() -> None:
    """A fresh random 60-bit prefix for this process, and a counter from a random start.

    Run at import and again in every forked child (``os.register_at_fork``): two workers, or a
    worker before and after a restart, never share a prefix (2**-60 per pair), so ids stay
    unique without a ``getrandom`` system call per request (a measurable cost per request on
    sandboxed kernels, see bench/HOTPATH.md)."""
    global _id_base, _id_counter
    high = int.from_bytes(os.urandom(8), "big")
    high = (high & ~0xF000) | _ID_VERSION
    _id_base = (high << 64) | _ID_VARIANT
    _id_counter = itertools.count(
        int.from_bytes(os.urandom(7), "big")
    )  # < 2**56: never reaches the variant bits


_reseed_request_ids()
os.register_at_fork(after_in_child=_reseed_request_ids)


def new_request_id() -> str:
    """A fresh id in ``uuid.uuid4().hex``'s exact form (32 hex digits, version and variant bits
    set): the process's random prefix plus a per-process counter (``_reseed_request_ids``)."""
    return f"{_id_base | next(_id_counter):032x}"


def request_id_from(headers: dict[str, str]) -> str:
    """The client's sane ``x-request-id``, else a fresh id (for callers that want one value)."""
    return client_request_id_from(headers) or new_request_id()


async def read_body(receive, limit: int, headers: dict[str, str]) -> bytes:
    """The whole request body, refusing (413) as soon as it is known to exceed ``limit``.

    A body in several chunks with a declared length is copied once into a preallocated
    ``bytearray`` (returned as is: orjson and every consumer take it), instead of a list of
    chunks joined at the end, which held the body twice at the peak (issue 13)."""
    declared = headers.get("content-length")
    expected = int(declared) if declared is not None and declared.isdigit() else None
    if expected is not None and expected > limit:
        raise ClientError(413, "request_too_large", f"request body exceeds {limit} bytes")
    msg = await receive()
    if msg["type"] == "http.disconnect":
        raise ClientGone
    body = msg.get("body", b"")
    if not msg.get("more_body"):
        if len(body) > limit:
            raise ClientError(413, "request_too_large", f"request body exceeds {limit} bytes")
        return body
    if expected is not None and len(body) <= expected:
        buf = bytearray(expected)
        view = memoryview(buf)
        size = len(body)
        view[:size] = body
        del body
        while True:
            msg = await receive()
            if msg["type"] == "http.disconnect":
                raise ClientGone
            chunk = msg.get("body", b"")
            end = size + len(chunk)
            if end > expected:  # more than declared: the server would have refused; be safe
                raise ClientError(400, "invalid_request", "request body longer than its Content-Length")
            view[size:end] = chunk
            size = end
            if not msg.get("more_body"):
                view.release()
                if size < expected:
                    del buf[size:]
                return buf  # type: ignore[return-value]  # bytes-like; orjson and consumers accept it
    chunks = [body]
    size = len(body)
    while True:
        msg = await receive()
        if msg["type"] == "http.disconnect":
            raise ClientGone
        chunk = msg.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise ClientError(413, "request_too_large", f"request body exceeds {limit} bytes")
        chunks.append(chunk)
        if not msg.get("more_body"):
            return b"".join(chunks)


class Exchange:
    """One client request/response. ``upstream_wait`` accumulates the seconds spent waiting on
    upstreams, so ``overhead_ms`` is the gateway's own time."""

    __slots__ = (
        "send",
        "protocol",
        "request_id",
        "t0",
        "upstream_wait",
        "headers_sent",
        "data_sent",
        "finished",
        "status",
        "lock",
        "last_write",
        "encoder",
        "_recorder",
        "_on_frame",
        "_loop",
        "anthropic_beta",
        "hop",
        "client_ip",
        "client_request_id",
        "client_gone",
        "endpoint",
        "key",
        "error",
        "recorded",
    )

    def __init__(self, send, protocol: str, request_id: str, t0: float) -> None:
        self.send = send
        self.protocol = protocol
        self.request_id = request_id
        self.t0 = t0
        self.upstream_wait = 0.0
        # A Messages client's beta opt-ins (Claude Code sends several): forwarded to Messages
        # upstreams only, the one client header that is.
        self.anthropic_beta: str | None = None
        # The client's own x-request-id, kept as data (echoed back, stored with a capture); the
        # request's identity is ``request_id``, always the gateway's own (issue 13: a client-chosen
        # id could collide with another key's capture or craft the viewer's links).
        self.client_request_id: str | None = None
        self.hop: str | None = (
            None  # the loop-guard header value to send upstream (``gateway.proxy.loopguard``)
        )
        self.client_gone = False  # the client disconnected and its request was cancelled
        self.headers_sent = False
        self.data_sent = False  # protocol data (not a keep-alive) reached the client
        self.finished = False
        self.status = 0
        self.lock: asyncio.Lock | None = None
        self.last_write = 0.0
        self.encoder: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None  # the stream's loop (``start_stream``)
        self.recorder = NULL_RECORDER  # told about what reaches the client
        # the client's address (``limits.client_ip``: behind a trusted proxy, the forwarded one)
        self.client_ip = ""
        # For the requests no pipeline recorder followed (refused before one existed, models list,
        # the non-generation endpoints): ``RecorderSet.finish_unrecorded`` reads these.
        self.endpoint = ""  # a bounded name of the path (``app.endpoint_of``), never the raw path
        self.key: Any = None  # the authenticated key, once known
        self.error: ClientError | None = None  # the last error answer sent
        self.recorded = False  # a pipeline recorder was started (``RecorderSet.start``)

    @property
    def recorder(self) -> Recorder:
        return self._recorder

    @recorder.setter
    def recorder(self, rec: Recorder) -> None:
        self._recorder = rec
        self._on_frame = hook_of(rec, "on_client_frame")  # fetched once, not per SSE write

    def overhead_ms(self) -> float:
        return max(0.0, (time.perf_counter() - self.t0 - self.upstream_wait) * 1000.0)

    def response_headers(self, content_type: bytes | None, sse: bool = False) -> list[tuple[bytes, bytes]]:
        own = self.request_id.encode()
        rid = self.client_request_id.encode() if self.client_request_id else own
        headers = list(SSE_HEADERS) if sse else [(b"content-type", content_type or JSON_CT)]
        headers.append((b"x-request-id", rid))
        if rid is not own:
            headers.append((b"x-gateway-request-id", own))
        if self.protocol == "messages":
            headers.append((b"request-id", rid))
        headers.append((b"x-gateway-overhead-ms", b"%.3f" % self.overhead_ms()))
        return headers

    async def send_bytes(
        self,
        status: int,
        body: bytes,
        content_type: bytes = JSON_CT,
        extra_headers: tuple[tuple[bytes, bytes], ...] = (),
    ) -> None:
        self.status = status
        self.headers_sent = True
        self.recorder.on_client_response(status, body)
        headers = self.response_headers(content_type)
        headers.extend(extra_headers)
        await self.send({"type": "http.response.start", "status": status, "headers": headers})
        await self.send({"type": "http.response.body", "body": body})
        self.finished = True

    async def send_json(self, status: int, body: Any) -> None:
        await self.send_bytes(status, orjson.dumps(body))

    async def send_error(self, err: ClientError) -> None:
        self.error = err
        body = error_bytes(self.protocol, err, self.request_id)
        await self.send_bytes(err.status, body, extra_headers=err.headers)

    # -- SSE ------------------------------------------------------------------------------------
    def start_stream(self) -> None:
        self.lock = asyncio.Lock()
        self._loop = asyncio.get_running_loop()
        self.last_write = self._loop.time()

    async def _commit(self) -> None:
        if not self.headers_sent:
            self.headers_sent = True
            self.status = 200
            await self.send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": self.response_headers(None, sse=True),
                }
            )

    async def write(self, data: bytes, *, is_data: bool = True) -> None:
        """Send SSE bytes, committing the 200 SSE response first if needed."""
        if self.finished:
            return
        lock, loop = self.lock, self._loop
        if lock is None:
            raise RuntimeError("Exchange.write before start_stream()")
        if loop is None:  # (a lock set by hand, not by ``start_stream``)
            loop = self._loop = asyncio.get_running_loop()
        await lock.acquire()  # (not ``async with``: two Python calls fewer per SSE write)
        try:
            if not self.headers_sent:
                await self._commit()
            if is_data:
                self.data_sent = True
            if data:
                on_frame = self._on_frame
                if on_frame is not None:
                    on_frame(data)
                await self.send({"type": "http.response.body", "body": data, "more_body": True})
            self.last_write = loop.time()
        finally:
            lock.release()

    async def keepalive(self) -> None:
        if self.finished or self.encoder is None:
            return
        await self.write(self.encoder.keepalive(), is_data=False)

    async def end_stream(self) -> None:
        if self.finished:
            return
        async with self.lock:
            await self._commit()
            self.finished = True
            await self.send({"type": "http.response.body", "body": b"", "more_body": False})


async def keepalive_loop(ex: Exchange, interval: float) -> None:
    """Sends the encoder's keep-alive after ``interval`` seconds without a write. A keep-alive
    commits the 200 SSE response but does not count as data: failover stays possible."""
    loop = asyncio.get_running_loop()
    while not ex.finished:
        delay = ex.last_write + interval - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
            continue
        await ex.keepalive()


async def wait_disconnect(receive) -> None:
    while True:
        msg = await receive()
        if msg["type"] == "http.disconnect":
            return


class DisconnectWatch:
    """Cancels the request's task when its client disconnects: a watcher task started at once
    (``delay`` <= 0) or after ``delay`` seconds. An object rather than a closure: a closure over
    the request's state made six cells, a function and a list per request, and kept them alive
    (and for the collector to scan) for every open stream."""

    __slots__ = ("task", "receive", "ex", "timer", "watcher")

    def __init__(
        self, task: asyncio.Task | None, receive: Callable[[], Awaitable[Any]], ex: Exchange, delay: float
    ) -> None:
        self.task = task
        self.receive = receive
        self.ex = ex
        self.watcher: asyncio.Task | None = None
        self.timer: asyncio.TimerHandle | None = None
        if delay <= 0:
            self.start()
        else:
            self.timer = asyncio.get_running_loop().call_later(delay, self.start)

    def start(self) -> None:
        self.watcher = asyncio.get_running_loop().create_task(self._watch())

    async def _watch(self) -> None:
        await wait_disconnect(self.receive)
        if self.task is not None and not self.ex.finished:
            self.ex.client_gone = True
            self.task.cancel()

    def cancel(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
        if self.watcher is not None:
            self.watcher.cancel()
