"""Client connection limits for the production server (issue 13): uvicorn's httptools protocol
with a header timeout, a body timeout and a cap on connections per worker.

uvicorn closes idle keep-alive connections (``--timeout-keep-alive``) and can answer 503 past
``--limit-concurrency``, but a connection that never sends a complete request head, or sends
its body a byte a minute, is held forever: 1,100 idle unauthenticated sockets used up the file
descriptors and locked every client out, with no log line. This protocol

- closes a connection whose request head is not complete within ``CLIENT_HEADER_TIMEOUT``
  seconds of the connection (or of the request's first byte, on a kept-alive connection);
- closes a connection whose request body is not complete within ``CLIENT_BODY_TIMEOUT``
  seconds of its head (the app then sees a client disconnect);
- refuses connections beyond ``CLIENT_MAX_CONNECTIONS`` per worker (closed at once), with a
  warning at most every 10 s that says how many were shed.

These timeouts and uvicorn's keep-alive timeout are deadlines, one float per connection, that one
timer per server checks (``_Sweep``, a few times per shortest timeout, at most once a second);
uvicorn arms a timer per request for the keep-alive alone, and the guards took two more (about
4-6 µs per request on uvloop, bench/HOTPATH.md).

After a burst of connections has gone (the worker held ``TRIM_AFTER_PEAK`` or more at once and
is down to a sixteenth of its peak) the worker returns the freed heap to the system: glibc keeps
freed ``malloc`` memory for reuse, so RSS stayed 10-15 MiB above idle after 2,000 connections
came and went (flat over further rounds: a high-water mark, not a leak). ``malloc_trim(0)`` a
second after the drop gives it back; it costs a few milliseconds once per burst, and nothing
where the C library has no ``malloc_trim`` (musl).

Use it with ``uvicorn gateway.asgi:application --http gateway.serving:GuardedHttpToolsProtocol``
(``make run`` and the e2e harness do). Knobs are read from ``gateway.conf`` at the first
connection (the app, and so Django's settings, is loaded by then).
"""

from __future__ import annotations

import logging
import math
import time
from asyncio import AbstractEventLoop, TimerHandle, Transport
from dataclasses import dataclass

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from gateway.proxy.idle_trim import trim_heap

log = logging.getLogger("gateway.serving")

SHED_LOG_SECONDS = 10.0
TRIM_AFTER_PEAK = 256  # open connections a burst must reach before its end trims the heap
TRIM_DELAY = 1.0  # seconds after the drop (the burst's last buffers are freed by then)


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    header_timeout: float
    body_timeout: float
    max_connections: int


_limits: ConnectionLimits | None = None
_shed = {"count": 0, "logged_at": 0.0}


def limits() -> ConnectionLimits:
    global _limits
    if _limits is None:
        from gateway.conf import gateway_settings as gw

        _limits = ConnectionLimits(
            header_timeout=float(gw.CLIENT_HEADER_TIMEOUT),
            body_timeout=float(gw.CLIENT_BODY_TIMEOUT),
            max_connections=int(gw.CLIENT_MAX_CONNECTIONS),
        )
    return _limits


def _note_shed(open_now: int, cap: int) -> None:
    _shed["count"] += 1
    now = time.monotonic()
    if now - _shed["logged_at"] >= SHED_LOG_SECONDS:
        log.warning(
            "shedding connections: %d refused (%d open, cap %d per worker; GATEWAY_CLIENT_MAX_CONNECTIONS)",
            _shed["count"],
            open_now,
            cap,
        )
        _shed["logged_at"] = now
        _shed["count"] = 0


_heap: dict = {"peak": 0, "pending": None, "trims": 0}


def _note_open(open_now: int) -> None:
    if open_now > _heap["peak"]:
        _heap["peak"] = open_now


def _note_closed(open_now: int, loop: AbstractEventLoop, connections: set) -> None:
    """A burst has gone: trim the heap a moment later (once; the next burst arms it again)."""
    peak = _heap["peak"]
    if peak >= TRIM_AFTER_PEAK and open_now <= peak // 16 and _heap["pending"] is None:
        _heap["pending"] = loop.call_later(TRIM_DELAY, _trim_heap, connections)


def _trim_heap(connections: set) -> None:
    _heap["pending"] = None
    if len(connections) > _heap["peak"] // 16:
        return  # the load came back; its end trims
    _heap["peak"] = len(connections)
    if trim_heap():
        _heap["trims"] += 1


class GuardedHttpToolsProtocol(HttpToolsProtocol):
    """``HttpToolsProtocol`` plus header/body timeouts and a per-worker connection cap.

    The timeouts, and uvicorn's keep-alive timeout, are deadlines on the connection that one sweep
    per server checks (``_Sweep``), not a timer each: uvicorn's protocol armed and cancelled a
    ``call_later`` for the keep-alive of every request, and the header and body guards two more.
    Each is a timer handle, a libuv timer and a context copy made and dropped per request; the
    deadline is one float. A connection is closed within ``_Sweep.interval`` after its deadline."""

    _deadline: float = math.inf  # when the connection is closed unless it makes progress
    _idle = False  # the deadline is the keep-alive timeout: closing then is routine, not logged

    def connection_made(self, transport: Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        lim = limits()
        if lim.max_connections > 0 and len(self.connections) > lim.max_connections:
            _note_shed(len(self.connections), lim.max_connections)
            self.connections.discard(self)
            transport.close()
            return
        _note_open(len(self.connections))
        self._due_in(lim.header_timeout)
        _Sweep.ensure(self)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self._idle or self._deadline == math.inf:  # a kept-alive connection's next request
            self._due_in(limits().header_timeout)

    def on_headers_complete(self) -> None:
        super().on_headers_complete()
        self._due_in(limits().body_timeout)

    def on_message_complete(self) -> None:
        self._deadline = math.inf  # the app has the request: nothing is due from the client
        super().on_message_complete()

    def on_response_complete(self) -> None:
        """uvicorn's, with the keep-alive timeout as a deadline instead of a ``call_later``."""
        self.server_state.total_requests += 1
        if self.transport.is_closing():
            return
        self.flow.resume_reading()
        if self.pipeline:
            cycle, app = self.pipeline.pop()
            self._start_asgi_task(cycle, app)
        elif self._deadline == math.inf:  # (not when the next request has begun)
            self._deadline = self.loop.time() + self.timeout_keep_alive
            self._idle = True

    def connection_lost(self, exc: Exception | None) -> None:
        self._deadline = math.inf
        super().connection_lost(exc)
        _note_closed(len(self.connections), self.loop, self.connections)

    def _due_in(self, seconds: float) -> None:
        self._idle = False
        self._deadline = self.loop.time() + seconds if seconds > 0 else math.inf

    def _expired(self) -> None:
        self._deadline = math.inf
        if self.transport.is_closing():
            return
        if not self._idle:
            log.info(
                "closing a client connection that did not send its request in time: %s",
                f"{self.client[0]}:{self.client[1]}" if self.client else "?",
            )
        self.transport.close()


class _Sweep:
    """Closes a server's connections whose deadline has passed: one timer per server (uvicorn's
    ``ServerState``, shared by its connections), running while it has connections."""

    __slots__ = ("connections", "loop", "interval", "handle")

    def __init__(self, proto: GuardedHttpToolsProtocol) -> None:
        self.connections = proto.connections
        self.loop = proto.loop
        lim = limits()
        shortest = min(
            (t for t in (lim.header_timeout, lim.body_timeout, float(proto.timeout_keep_alive)) if t > 0),
            default=1.0,
        )
        self.interval = min(1.0, max(0.05, shortest / 4))
        self.handle: TimerHandle | None = None

    @classmethod
    def ensure(cls, proto: GuardedHttpToolsProtocol) -> None:
        state = proto.server_state
        sweep = getattr(state, "gateway_sweep", None)
        if sweep is None:  # (a server's connections all run on its one loop)
            sweep = cls(proto)
            state.gateway_sweep = sweep  # type: ignore[attr-defined]
        if sweep.handle is None:
            sweep.handle = sweep.loop.call_later(sweep.interval, sweep.run)

    def run(self) -> None:
        self.handle = None
        if not self.connections:
            return  # the next connection starts it again
        now = self.loop.time()
        # (WebSocket protocols share the set and have no deadline)
        for conn in [
            c for c in self.connections if isinstance(c, GuardedHttpToolsProtocol) and c._deadline <= now
        ]:
            conn._expired()
        self.handle = self.loop.call_later(self.interval, self.run)
