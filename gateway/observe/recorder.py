"""The observe recorder: metrics, the per-request log line and the live tail from the
pipeline's ``Recorder`` hooks. Always on, so every hook is a few attribute writes or a counter
increment; the log line and the live-tail publish happen in ``on_finish`` and only when
someone listens. ``bench/bench_observe_recorder.py`` measures its cost per request.
"""

from __future__ import annotations

import logging
import re
import time
from typing import Any

from gateway.proxy.pricing import Tokens, cost_nano
from gateway.proxy.recorder import Recorder

from . import accesslog, live
from . import metrics as m

QUEUE_REFRESH_SECONDS = 1.0
_TRANSFORM = re.compile(r"transform '?([A-Za-z0-9_.:-]+)'? (?:failed|could not)")

_level = logging.INFO
_queues_at = 0.0
_drops_seen: dict[str, int] = {}


def configure(level: str | int) -> None:
    """The access line's level (the ``ACCESS_LOG_LEVEL`` knob)."""
    global _level
    _level = level if isinstance(level, int) else logging.getLevelName(str(level).upper())
    if not isinstance(_level, int):
        raise ValueError(f"unknown log level {level!r}")


def observe_recorder(ex: Any, snapshot: Any, key: Any, raw_body: bytes) -> ObserveRecorder:
    """The factory wired into the proxy: every generation request gets one."""
    return ObserveRecorder(ex, key.name)


class ObserveRecorder(Recorder):
    __slots__ = (
        "ex",
        "t0",
        "key",
        "model",
        "stream",
        "provider",
        "channel",
        "channel_id",
        "attempts",
        "ttfb",
        "usage",
        "prices",
        "quiet",
    )

    def __init__(self, ex: Any, key: str, quiet: bool = False) -> None:
        if not live.poll_checked:  # once per process: the Redis layer's cross-worker viewer poll
            live.start_poller()
        self.ex = ex
        self.quiet = quiet  # metrics only: no access line, no live-tail event (a shed keyless answer)
        self.t0 = ex.t0
        self.key = key
        self.model = ""
        self.stream = False
        self.provider = ""
        self.channel = ""
        self.channel_id: int | None = None
        self.attempts = 0
        self.ttfb: float | None = None
        self.usage: Any = None
        self.prices: Any = None

    def on_request_decoded(self, call: Any) -> None:
        self.model = call.logical_model
        self.stream = call.client_stream
        if live.watching():  # the live tail's pending row (a request failing before this shows at its end)
            ex = self.ex
            live.publish(
                {
                    "phase": "start",
                    "request_id": ex.request_id,
                    "protocol": ex.protocol,
                    "key": self.key,
                    "model": self.model,
                    "stream": self.stream,
                    "at": time.time(),
                }
            )

    def on_attempt_start(self, att: Any) -> None:
        provider = m.capped("provider", att.provider.name)
        channel = m.capped("channel", att.channel.name)
        if self.attempts:
            children = m.retries if att.channel.id == self.channel_id else m.failovers
            children(provider, channel).inc()
        self.attempts += 1
        self.provider = provider
        self.channel = channel
        self.channel_id = att.channel.id
        self.prices = att.channel.prices

    def on_attempt_done(self, att: Any, started: float) -> None:
        m.attempts(self.provider, self.channel, "ok").inc()

    def on_attempt_failed(self, att: Any, failed: Any, started: float) -> None:
        outcome = "rate_limited" if failed.rate_limited else "retryable" if failed.retryable else "fatal"
        m.attempts(self.provider, self.channel, outcome).inc()

    def on_usage(self, usage: Any) -> None:
        self.usage = usage

    def on_response(self, resp: Any, executed: list[Any]) -> None:
        self.usage = resp.usage

    def on_client_response(self, status: int, body: bytes) -> None:
        if self.ttfb is None:
            self.ttfb = time.perf_counter() - self.t0

    def on_client_frame(self, data: bytes) -> None:
        if self.ttfb is None:
            self.ttfb = time.perf_counter() - self.t0

    def on_finish(self, ex: Any, error: str | None) -> None:
        try:
            self._finish(ex, error)
        except Exception:  # observing must never affect the client
            logging.getLogger("gateway.observe").warning("observe recorder failed", exc_info=True)

    def _finish(self, ex: Any, error: str | None) -> None:
        duration = time.perf_counter() - self.t0
        status = ex.status
        protocol = ex.protocol
        model = m.capped("model", self.model) if self.model else ""
        stream = "true" if self.stream else "false"
        m.requests(protocol, model, self.provider, self.channel, str(status)).inc()
        m.duration(protocol, stream).observe(duration)
        if error is not None or status >= 400:
            code = error.partition(": ")[0] if error is not None else f"http_{status}"
            m.errors(protocol, ex.endpoint or "other", str(status), m.capped("code", code)).inc()
        if self.ttfb is not None:
            m.ttfb(protocol, stream).observe(self.ttfb)
        usage = self.usage
        if usage is not None:
            _tokens(model, usage)
            price = self.prices.get(self.model) if self.prices else None
            if price is not None:
                _count_cost(model, usage, price)
        if error is not None and error.startswith(("transform_apply_failed", "transform_init_failed")):
            _count_transform_failure(error)
        now = time.monotonic()
        if now - _queues_at >= QUEUE_REFRESH_SECONDS:
            _refresh_queues(now)
        if self.quiet:
            return
        logged = accesslog.log.isEnabledFor(_level)
        if not (logged or live.watching()):
            return
        fields = {
            "request_id": ex.request_id,
            "protocol": protocol,
            "endpoint": ex.endpoint,
            "model": self.model,
            "stream": self.stream,
            "status": status,
            "duration_ms": round(duration * 1000.0, 3),
            "ttfb_ms": None if self.ttfb is None else round(self.ttfb * 1000.0, 3),
            "attempts": self.attempts,
            "provider": self.provider,
            "channel": self.channel,
            "key": self.key,
            "error": error,
            "input_tokens": usage.input_tokens if usage is not None else None,
            "output_tokens": usage.output_tokens if usage is not None else None,
        }
        if logged:
            accesslog.emit(_level, fields)
        if live.watching():
            live.publish({"phase": "end", "at": time.time(), **fields})


def _tokens(model: str, usage: Any) -> None:
    tokens = m.tokens
    if usage.input_tokens:
        tokens(model, "input").inc(usage.input_tokens)
    if usage.output_tokens:
        tokens(model, "output").inc(usage.output_tokens)
    if usage.cache_read_tokens:
        tokens(model, "cache_read").inc(usage.cache_read_tokens)
    if usage.cache_creation_tokens:
        tokens(model, "cache_write").inc(usage.cache_creation_tokens)
    if usage.reasoning_tokens:
        tokens(model, "reasoning").inc(usage.reasoning_tokens)


def _count_cost(model: str, usage: Any, price: Any) -> None:
    """Add the request's cost (in currency units, priced per the channel's table) to the counter."""
    tokens = Tokens(
        input=usage.input_tokens or 0,
        output=usage.output_tokens or 0,
        cache_read=usage.cache_read_tokens or 0,
        cache_write=usage.cache_creation_tokens or 0,
        reasoning=usage.reasoning_tokens or 0,
    )
    m.cost(model).inc(cost_nano(tokens, price) / 1e9)


def _count_transform_failure(error: str) -> None:
    """Count a transform failure under the transform's id, read back from the error text."""
    # "transform apply failed: transform <id> failed: ..." (a rule's bug, ``chain._guard``) or
    # "transform '<id>' could not be initialised: ..."; a rule's own TransformFailed names none
    found = [name for name in _TRANSFORM.findall(error) if name != "apply"]
    m.TRANSFORM_FAILURES.labels(m.capped("transform", found[-1] if found else "unknown")).inc()


def _refresh_queues(now: float) -> None:
    """Queue depths and new drops of the registered writers, at most once a second per process."""
    global _queues_at
    _queues_at = now
    for name, read in m.QUEUES.items():
        try:
            depth, dropped = read()
        except Exception:
            continue
        m.QUEUE_DEPTH.labels(name).set(depth)
        new = dropped - _drops_seen.get(name, 0)
        if new > 0:
            m.QUEUE_DROPS.labels(name).inc(new)
        _drops_seen[name] = dropped
