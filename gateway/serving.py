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
    """``HttpToolsProtocol`` plus header/body timeouts and a per-worker connection cap."""

    _guard: TimerHandle | None = None

    def connection_made(self, transport: Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        lim = limits()
        if lim.max_connections > 0 and len(self.connections) > lim.max_connections:
            _note_shed(len(self.connections), lim.max_connections)
            self.connections.discard(self)
            transport.close()
            return
        _note_open(len(self.connections))
        self._arm(lim.header_timeout)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self._guard is None:  # a kept-alive connection's next request
            self._arm(limits().header_timeout)

    def on_headers_complete(self) -> None:
        super().on_headers_complete()
        self._arm(limits().body_timeout)

    def on_message_complete(self) -> None:
        self._disarm()
        super().on_message_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)
        _note_closed(len(self.connections), self.loop, self.connections)

    def _arm(self, seconds: float) -> None:
        self._disarm()
        if seconds > 0:
            self._guard = self.loop.call_later(seconds, self._expired)

    def _disarm(self) -> None:
        if self._guard is not None:
            self._guard.cancel()
            self._guard = None

    def _expired(self) -> None:
        self._guard = None
        if not self.transport.is_closing():
            log.info(
                "closing a client connection that did not send its request in time: %s",
                f"{self.client[0]}:{self.client[1]}" if self.client else "?",
            )
            self.transport.close()
