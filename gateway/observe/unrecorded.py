"""Observing the ``/v1`` answers no pipeline recorder followed: requests refused before one
existed (no or a bad key: 401; an IP allow-list refusal: 403; a body over the limit: 413; an
unknown path: 404; a wrong method: 405; a body that is not JSON on a non-generation endpoint),
the models list and the non-generation endpoints. The proxy hands each such answer to
``RecorderSet.finish_unrecorded``, which builds the recorder this module's factory answers and
calls its ``on_finish``: the same recorder (metrics, access line, live tail, and the request-log
row when request logs are on) and hand-off the generation requests use, so there is one path and
one writer.

Why a budget for requests without a valid key: a 401 costs the sender nothing, so an
unauthenticated flood could otherwise fill the request-log queue (pushing out the rows of real
traffic), the database and the log. Such answers are always counted in the metrics
(``gateway_requests_total``, ``gateway_request_errors_total``: cheap and bounded), but written
as a row and an access line only within ``REQUEST_LOG_KEYLESS_PER_SECOND`` per worker (a token
bucket, burst of one second's worth) and only while the request-log queue is at most half full.
The rest are counted in ``gateway_request_log_shed_total{reason}`` and summed in one warning a
minute. Answers to authenticated requests (a 403 for an address, a 413) are never sampled: a
key holder's traffic is accounted like any other.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from gateway.proxy.recorder import Recorder, UnrecordedFactory

from . import metrics as m
from .recorder import ObserveRecorder

log = logging.getLogger("gateway.observe")
WARN_EVERY_SECONDS = 60.0


class KeylessBudget:
    """A token bucket: ``take`` answers whether one more keyless answer may be logged now.
    ``rate`` per second, a burst of ``max(rate, 1)``; ``rate == 0`` logs none, ``rate < 0`` all.
    One per worker, used on the event loop's thread only (no lock)."""

    __slots__ = ("rate", "burst", "tokens", "at")

    def __init__(self, rate: float) -> None:
        self.rate = rate
        self.burst = max(rate, 1.0)
        self.tokens = self.burst
        self.at = time.monotonic()

    def take(self) -> bool:
        if self.rate < 0:
            return True
        if self.rate == 0:
            return False
        now = time.monotonic()
        self.tokens = min(self.burst, self.tokens + (now - self.at) * self.rate)
        self.at = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return True
        return False


class _ShedReport:
    """Shed answers counted since the last warning; one warning line a minute at most."""

    __slots__ = ("counts", "since")

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.since = time.monotonic()

    def add(self, reason: str) -> None:
        m.SHED.labels(reason).inc()
        self.counts[reason] = self.counts.get(reason, 0) + 1
        now = time.monotonic()
        if now - self.since >= WARN_EVERY_SECONDS:
            log.warning(
                "answers to requests without a valid API key not logged in the last %.0f s: %s "
                "(counted in gateway_requests_total; see REQUEST_LOG_KEYLESS_PER_SECOND)",
                now - self.since,
                ", ".join(f"{k}={v}" for k, v in sorted(self.counts.items())),
            )
            self.counts = {}
            self.since = now


def unrecorded_factory(
    *, keyless_per_second: float, logged: UnrecordedFactory | None, queue_busy: Callable[[], bool]
) -> UnrecordedFactory:
    """The proxy's ``RecorderSet.unrecorded``: ``logged``'s recorder (request logs on: the
    observe recorder that also writes the row, ``requestlogs.recorder``), or the plain observe
    recorder when request logs are off (``logged`` None) or a keyless answer is shed.
    ``queue_busy`` answers whether the request-log queue is too full for a keyless row."""
    budget = KeylessBudget(keyless_per_second)
    shed = _ShedReport()

    def factory(ex: Any, key: Any) -> Recorder:
        if key is None:
            reason = "queue" if logged is not None and queue_busy() else None if budget.take() else "budget"
            if reason is not None:
                shed.add(reason)
                return ObserveRecorder(ex, "", quiet=True)
        rec = logged(ex, key) if logged is not None else None
        return rec if rec is not None else ObserveRecorder(ex, key.name if key is not None else "")

    return factory
