"""The request-log recorder: follows one request through the pipeline's ``Recorder`` hooks,
keeping a handful of scalars, and hands itself to ``requestlogs.sink`` when the request is
finished; the writer thread builds the row from it (``values``: the INSERT's values, no dict in
between; ``row`` for the dict form). On the event loop the end of a request only seals what the
row needs (the exchange's scalars, the last attempt's route) and lets go of the exchange and the
attempt, so a 1 MB request's body is not kept while its row waits. Building the row dict on the
loop was about 30k instructions per request there, and the writer picked it apart again
(bench/REQUESTLOGS.md). Nothing is serialised on the request path and nothing touches the ORM
(the key's owner is resolved by the writer).

It is the observe recorder (metrics, access line, live tail: ``gateway.observe.recorder``) with
the row added, not a second recorder beside it: the two follow the same hooks and keep the same
model, stream flag, usage and time to first byte, and as two recorders every request paid a
fan-out, a second object and a second call per hook (about 14 µs of a worker's CPU per request
under load for the fan-out alone, ``bench/REQUESTLOGS.md``).

``make_factory`` gives the factory the project wires into the proxy (``gateway.wiring``) in place
of the plain observe recorder's; it answers None (no recorder) when request logs are switched
off (``GATEWAY_REQUEST_LOGS``), and the observe recorder is then wired alone.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from gateway.dbtext import storable
from gateway.observe.recorder import ObserveRecorder
from gateway.proxy.pricing import Tokens, cost_nano, estimate_tokens
from gateway.proxy.recorder import RecorderFactory, UnrecordedFactory
from gateway.urp.events import NodeDelta, StreamError
from requestlogs import sink
from requestlogs.rowfields import as_dict

log = logging.getLogger("requestlogs")

ERROR_TEXT_MAX = 2048


def make_factory(enabled: bool) -> RecorderFactory | None:
    """The factory of every generation request's recorder (observe and log row), or None when
    request logs are off."""
    if not enabled:
        return None

    def request_log_recorder(ex: Any, snapshot: Any, key: Any, raw_body: bytes) -> RequestLogRecorder:
        capture = key.capture_mode if snapshot.settings.capture_enabled else "off"
        return RequestLogRecorder(ex, key, len(raw_body), capture)

    return request_log_recorder


def make_unrecorded_factory(enabled: bool) -> UnrecordedFactory | None:
    """The recorder for an answer no pipeline recorder followed (``RecorderSet.finish_unrecorded``):
    a refusal before one existed, the models list, a non-generation endpoint. ``key`` is None
    when the request had no valid key; the presented secret is never kept. None when off."""
    if not enabled:
        return None

    def unrecorded_row(ex: Any, key: Any) -> RequestLogRecorder:
        rec = RequestLogRecorder(ex, key, 0, "off")
        rec.created_at -= time.perf_counter() - ex.t0  # built at the end: back-date to the start
        return rec

    return unrecorded_row


def _to_ms(seconds: float) -> float:
    """Milliseconds to the microsecond. Not ``round(x, 3)``: that goes through a decimal string
    (dtoa), several times the cost of this integer arithmetic, three times per row."""
    return int(seconds * 1_000_000.0 + 0.5) / 1000.0


class RequestLogRecorder(ObserveRecorder):
    """One request's observation and its log row in the making. From the observe recorder:
    ``model``, ``stream``, ``usage`` (None until the upstream reports one, and when it reports
    none), ``ttfb`` (seconds), ``t0``. Here: ``attempt`` is the attempt in flight (attempts are
    sequential), ``tried`` the finished ones (``_tried``'s tuples), ``completed`` whether a whole
    response or a stream's terminal event was seen; once finished, ``sealed`` holds the
    exchange's part of the row and ``route`` the last attempt's (``seal``)."""

    __slots__ = (
        "api_key",
        "created_at",
        "body_len",
        "capture",
        "attempt",
        "upstream_status",
        "attempt_t",
        "tried",
        "completed",
        "out_chars",
        "stream_error",
        "sealed",
        "route",
    )

    def __init__(self, ex: Any, key: Any, body_len: int, capture: str) -> None:
        super().__init__(ex, key.name if key is not None else "")
        self.api_key = key
        self.created_at = time.time()
        self.body_len = body_len
        self.capture = capture
        self.attempt: Any = None
        self.upstream_status: int | None = None
        self.attempt_t: float | None = None  # the attempt in flight's start (None: none in flight)
        self.tried: list[tuple[Any, ...]] = []
        self.completed = False
        self.out_chars = 0  # streamed text, for an estimate when the upstream reports no usage
        self.stream_error: tuple[str, str] | None = None
        self.sealed: tuple[Any, ...] = ()
        self.route: tuple[Any, ...] | None = None

    # -- hooks (the observe recorder's part first) ---------------------------------------------
    def on_attempt_start(self, att: Any) -> None:
        ObserveRecorder.on_attempt_start(self, att)
        self.attempt = att
        self.upstream_status = None
        self.attempt_t = time.perf_counter()

    def on_upstream_response(self, status: int, started: float) -> None:
        self.upstream_status = status

    def on_usage(self, usage: Any) -> None:
        self.usage = usage
        self.completed = True

    def on_response(self, resp: Any, executed: list[Any]) -> None:
        self.completed = True
        self.usage = resp.usage
        if resp.usage is not None:
            return
        for node in resp.output:  # no usage: the answer's text, for an estimate
            for name in ("content", "arguments"):
                text = getattr(node, name, None)
                if isinstance(text, str):
                    self.out_chars += len(text)

    def on_response_events(self, events: list[Any]) -> None:
        for event in events:
            cls = event.__class__
            if cls is NodeDelta:
                self.out_chars += len(event.delta)
            elif cls is StreamError and self.stream_error is None:
                self.stream_error = (event.code or "stream_error", event.message or "")

    def on_attempt_done(self, att: Any, started: float) -> None:
        ObserveRecorder.on_attempt_done(self, att, started)
        self._tried(att, self.upstream_status, started, None)

    def on_attempt_failed(self, att: Any, failed: Any, started: float) -> None:
        ObserveRecorder.on_attempt_failed(self, att, failed, started)
        error = (failed.code or "", (failed.message or "")[:ERROR_TEXT_MAX])
        self._tried(att, failed.status or self.upstream_status, started, error)

    def _tried(self, att: Any, status: int | None, started: float, error: tuple[str, str] | None) -> None:
        """An attempt is over: (provider, channel, upstream model, status, seconds, (code,
        message) or None), made into the row's entry by ``_attempt_entry`` on the writer."""
        self.attempt_t = None
        self.tried.append(
            (att.provider, att.channel, att.upstream_model, status, time.perf_counter() - started, error)
        )

    def on_finish(self, ex: Any, error: str | None) -> None:
        ObserveRecorder.on_finish(self, ex, error)  # never raises
        try:
            self.seal(ex, error)
            sink.submit(self)
        except Exception:  # a log row must never affect the client
            log.warning("request log row could not be sealed", exc_info=True)

    def seal(self, ex: Any, error: str | None) -> None:
        """Keep what the row needs from the exchange and the attempt, and let go of both."""
        self.sealed = (
            time.perf_counter(),
            error,
            ex.request_id,
            ex.client_request_id,
            ex.protocol,
            ex.endpoint,
            ex.client_ip,
            ex.finished,
            ex.status,
        )
        att = self.attempt
        if att is not None:
            self.route = (att.provider, att.channel, att.upstream_model, att.affinity)
            self.attempt = None
        self.ex = None

    # -- the row (on the writer thread) ---------------------------------------------------------
    def row(self) -> dict[str, Any]:
        """The row as a dict (the Celery task's and the spool's form)."""
        return as_dict(self.values())

    def values(self) -> tuple[Any, ...]:
        """The row's values in ``ROW_FIELDS`` order: the form the SQLite insert takes without a
        dict in between (``requestlogs.store``)."""
        now, error, own_id, crid, protocol, endpoint, client, finished, http_status = self.sealed
        route = self.route
        key = self.api_key
        status, code, message = self._outcome(finished, http_status, error)
        cost = None
        if route is not None:
            provider, channel, upstream_model, affinity = route
            if self.attempt_t is not None:  # cut short (the client left)
                self._cut_short(route, now, code, message)
        else:
            provider = channel = upstream_model = affinity = None
        tokens, estimated = self._tokens()
        if channel is not None and status != "error":
            price = channel.prices.get(self.model)
            if price is not None:
                cost = cost_nano(Tokens(*tokens), price)
        abnormal = len(self.tried) != 1 or status != "success" or not self.usage
        return (
            own_id,
            crid or own_id,
            (crid or "")[:256],
            self.created_at,
            key.id if key is not None else None,
            key.name if key is not None else "",
            protocol,
            endpoint,
            self.stream,
            client or None,
            storable(self.model),
            upstream_model or "",
            provider.name if provider is not None else "",
            channel.name if channel is not None else "",
            provider.id if provider is not None else None,
            channel.id if channel is not None else None,
            [_attempt_entry(t) for t in self.tried],
            bool(affinity and affinity.get("hit")),
            *tokens,
            cost,
            estimated and cost is not None,
            status,
            499 if status == "client_gone" else http_status,
            storable(code),
            storable(message),
            _to_ms(now - self.t0),
            _to_ms(self.ttfb) if self.ttfb is not None else None,
            self.capture == "all" or (self.capture == "abnormal" and abnormal),
        )

    def request_id(self) -> str:
        return str(self.sealed[2]) if self.sealed else ""

    def _cut_short(self, route: tuple[Any, ...], now: float, code: str, message: str) -> None:
        """The attempt in flight when the request ended, as ``_tried``'s tuple."""
        started = self.attempt_t or now
        self.attempt_t = None
        self.tried.append((*route[:3], self.upstream_status, now - started, (code or "interrupted", message)))

    def _outcome(self, finished: bool, http_status: int, error: str | None) -> tuple[str, str, str]:
        """(status, error code, error message)."""
        if not finished and error is None:
            return "client_gone", "client_gone", "the client disconnected before the response was finished"
        if error is not None:
            code, _, message = error.partition(": ")
            if code == "client_gone":  # the proxy cancelled the request because the client left
                return "client_gone", code, message[:ERROR_TEXT_MAX]
            return "error", code, message[:ERROR_TEXT_MAX]
        if self.stream_error is not None:
            return "error", self.stream_error[0], self.stream_error[1][:ERROR_TEXT_MAX]
        if http_status >= 400:
            return "error", f"http_{http_status}", ""
        if self.stream and not self.completed:
            failed = self.tried[-1][5] if self.tried else None
            return "error", "stream_incomplete", (failed and failed[1]) or "the upstream stream ended early"
        return "success", "", ""

    def _tokens(self) -> tuple[tuple[int, int, int, int, int], bool]:
        """(input, output, cache read, cache write, reasoning) as the upstream reported them;
        without a report, an estimate for a request that reached an upstream (``True``:
        estimated)."""
        usage = self.usage
        if usage:
            return (
                usage.input_tokens or 0,
                usage.output_tokens or 0,
                usage.cache_read_tokens or 0,
                usage.cache_creation_tokens or 0,
                usage.reasoning_tokens or 0,
            ), False
        reached = self.upstream_status is not None and self.upstream_status < 300
        if self.route is None or not reached:
            return (0, 0, 0, 0, 0), False
        return (estimate_tokens(self.body_len), estimate_tokens(self.out_chars), 0, 0, 0), True


def _attempt_entry(tried: tuple[Any, ...]) -> dict[str, Any]:
    """One tried attempt as the row's ``attempts`` list holds it."""
    provider, channel, upstream_model, status, seconds, error = tried
    entry = {
        "provider": provider.name,
        "channel": channel.name,
        "upstream_model": upstream_model,
        "status": status,
        "duration_ms": _to_ms(seconds),
    }
    if error is not None:
        entry["code"], entry["error"] = storable(error[0]), storable(error[1])
    return entry
