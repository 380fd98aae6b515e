"""The request-log recorder: follows one request through the pipeline's ``Recorder`` hooks,
keeping a handful of scalars, and hands one small dict to ``requestlogs.sink`` when the request
is finished. Nothing is serialised on the request path and nothing touches the ORM (the key's
owner is resolved by the writer).

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

from gateway.observe.recorder import ObserveRecorder
from gateway.proxy.pricing import Tokens, cost_nano, estimate_tokens
from gateway.proxy.recorder import RecorderFactory, UnrecordedFactory
from gateway.urp.events import NodeDelta, StreamError
from requestlogs import sink

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
    sequential), ``tried`` the finished ones' entries, ``completed`` whether a whole response
    or a stream's terminal event was seen."""

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
        self.tried: list[dict[str, Any]] = []
        self.completed = False
        self.out_chars = 0  # streamed text, for an estimate when the upstream reports no usage
        self.stream_error: tuple[str, str] | None = None

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
        self._attempt(att, started, None)

    def on_attempt_failed(self, att: Any, failed: Any, started: float) -> None:
        ObserveRecorder.on_attempt_failed(self, att, failed, started)
        self._attempt(att, started, failed)

    def _attempt(self, att: Any, started: float, failed: Any) -> None:
        self.attempt_t = None
        entry = {
            "provider": att.provider.name,
            "channel": att.channel.name,
            "upstream_model": att.upstream_model,
            "status": self.upstream_status if failed is None else (failed.status or self.upstream_status),
            "duration_ms": _to_ms(time.perf_counter() - started),
        }
        if failed is not None:
            entry["code"] = failed.code or ""
            entry["error"] = (failed.message or "")[:ERROR_TEXT_MAX]
        self.tried.append(entry)

    def on_finish(self, ex: Any, error: str | None) -> None:
        ObserveRecorder.on_finish(self, ex, error)  # never raises
        try:
            sink.submit(self.row(ex, error))
        except Exception:  # a log row must never affect the client
            log.warning("request log row could not be built", exc_info=True)

    # -- the row ------------------------------------------------------------------------------
    def row(self, ex: Any, error: str | None) -> dict[str, Any]:
        now = time.perf_counter()
        att = self.attempt
        key = self.api_key
        status, code, message = self._outcome(ex, error)
        if att is not None and self.attempt_t is not None:  # cut short (the client left)
            self._cut_short(att, now, code, message)
        tokens, estimated = self._tokens()
        cost = None
        if att is not None and status != "error":
            price = att.channel.prices.get(self.model)
            if price is not None:
                cost = cost_nano(tokens, price)
        crid = ex.client_request_id
        own_id = ex.request_id  # the gateway's own id (issue 13), also the capture's identity
        abnormal = len(self.tried) != 1 or status != "success" or not self.usage
        client = ex.client
        return {
            "request_id": own_id,
            # the id echoed in x-request-id (the client's when it sent a sane one); since issue 13 a
            # capture's identity is the gateway's own id, ``request_id``
            "x_request_id": crid or ex.request_id,
            "client_request_id": (crid or "")[:256],
            "created_at": self.created_at,
            "api_key_id": key.id if key is not None else None,
            "api_key_name": key.name if key is not None else "",
            "client_protocol": ex.protocol,
            "endpoint": ex.endpoint,
            "stream": self.stream,
            "client_ip": client[0] if client else None,
            "logical_model": self.model,
            "upstream_model": att.upstream_model if att is not None else "",
            "provider": att.provider.name if att is not None else "",
            "channel": att.channel.name if att is not None else "",
            "provider_ref": att.provider.id if att is not None else None,
            "channel_ref": att.channel.id if att is not None else None,
            "attempts": self.tried,
            "affinity": bool(att is not None and (getattr(att, "affinity", None) or {}).get("hit")),
            "input_tokens": tokens.input,
            "output_tokens": tokens.output,
            "cache_read_tokens": tokens.cache_read,
            "cache_write_tokens": tokens.cache_write,
            "reasoning_tokens": tokens.reasoning,
            "cost_nano": cost,
            "cost_estimated": estimated and cost is not None,
            "status": status,
            "http_status": 499 if status == "client_gone" else ex.status,
            "error_code": code,
            "error_message": message,
            "duration_ms": _to_ms(now - ex.t0),
            "ttfb_ms": _to_ms(self.ttfb) if self.ttfb is not None else None,
            "has_capture": self.capture == "all" or (self.capture == "abnormal" and abnormal),
        }

    def _cut_short(self, att: Any, now: float, code: str, message: str) -> None:
        self.tried.append(
            {
                "provider": att.provider.name,
                "channel": att.channel.name,
                "upstream_model": att.upstream_model,
                "status": self.upstream_status,
                "duration_ms": _to_ms(now - self.attempt_t),
                "code": code or "interrupted",
                "error": message,
            }
        )

    def _outcome(self, ex: Any, error: str | None) -> tuple[str, str, str]:
        """(status, error code, error message)."""
        if not ex.finished and error is None:
            return "client_gone", "client_gone", "the client disconnected before the response was finished"
        if error is not None:
            code, _, message = error.partition(": ")
            if code == "client_gone":  # the proxy cancelled the request because the client left
                return "client_gone", code, message[:ERROR_TEXT_MAX]
            return "error", code, message[:ERROR_TEXT_MAX]
        if self.stream_error is not None:
            return "error", self.stream_error[0], self.stream_error[1][:ERROR_TEXT_MAX]
        if ex.status >= 400:
            return "error", f"http_{ex.status}", ""
        if self.stream and not self.completed:
            last = self.tried[-1] if self.tried else {}
            return "error", "stream_incomplete", str(last.get("error") or "the upstream stream ended early")
        return "success", "", ""

    def _tokens(self) -> tuple[Tokens, bool]:
        """The usage the upstream reported; without one, an estimate for a request that reached
        an upstream (``True``: estimated)."""
        usage = self.usage
        if usage:
            return Tokens(
                input=usage.input_tokens or 0,
                output=usage.output_tokens or 0,
                cache_read=usage.cache_read_tokens or 0,
                cache_write=usage.cache_creation_tokens or 0,
                reasoning=usage.reasoning_tokens or 0,
            ), False
        reached = self.upstream_status is not None and self.upstream_status < 300
        if self.attempt is None or not reached:
            return Tokens(), False
        return Tokens(input=estimate_tokens(self.body_len), output=estimate_tokens(self.out_chars)), True
