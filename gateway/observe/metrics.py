"""Prometheus metrics for the proxy and the ``/metrics`` endpoint.

Several workers: with ``PROMETHEUS_MULTIPROC_DIR`` set in the environment before the server
starts (``make run`` and ``tests/servers.py`` do), ``prometheus_client`` runs in multiprocess
mode: each worker writes its samples to memory-mapped files in that directory and a scrape,
answered by whichever worker receives it, sums every worker's files. The directory must be
emptied before the server starts (stale files would be summed too). Without it, the metrics are
the answering process's own (correct for one worker).

Gauges read at scrape (breaker state) are the answering worker's view; the breaker is shared
between workers through Redis when ``REDIS_URL`` is set, so the view is the same everywhere then.

Label cardinality is bounded: model, provider and channel names pass through :func:`capped`,
which keeps the first ``MAX_LABEL_VALUES`` distinct values per label and answers ``other`` for
the rest (a client can send any model name; a 404 for it must not grow the registry).
"""

from __future__ import annotations

import hmac
import ipaddress
import os
from bisect import bisect_left
from collections.abc import Callable, Iterable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from gateway.proxy.limits import client_ip

MULTIPROC = bool(os.environ.get("PROMETHEUS_MULTIPROC_DIR"))
MAX_LABEL_VALUES = 200
OTHER = "other"

_seen: dict[str, set[str]] = {
    "model": set(),
    "provider": set(),
    "channel": set(),
    "transform": set(),
    "code": set(),
}


def capped(kind: str, value: str) -> str:
    """``value`` as a label, or ``other`` once ``kind`` has ``MAX_LABEL_VALUES`` distinct values."""
    seen = _seen[kind]
    if value in seen:
        return value
    if len(seen) >= MAX_LABEL_VALUES:
        return OTHER
    seen.add(value)
    return value


class Children:
    """``metric.labels(*values)`` memoised: ``labels()`` validates and locks on every call (the
    largest cost of the recorder when measured); a dict lookup on the value tuple is ~20× cheaper.
    Bounded like the label values themselves (see :func:`capped`). A counter's or histogram's
    child comes wrapped in ``_FastCounter`` / ``_FastHistogram``."""

    __slots__ = ("metric", "children", "wrap")

    def __init__(self, metric: Any) -> None:
        self.metric = metric
        self.children: dict[tuple[str, ...], Any] = {}
        self.wrap: Callable[[Any], Any] = (
            _FastHistogram.of
            if isinstance(metric, Histogram)
            else _FastCounter.of
            if isinstance(metric, Counter)
            else _same
        )

    def __call__(self, *values: str) -> Any:
        child = self.children.get(values)
        if child is None:
            child = self.children[values] = self.wrap(self.metric.labels(*values))
        return child


def _same(child: Any) -> Any:
    return child


class _FastCounter:
    """A counter child's ``inc`` straight to its value (in-process or multiprocess mmap), without
    prometheus_client's per-call checks (observability, sign, exemplar): about half of what the
    request's metrics cost. Our amounts are never negative. Falls back to the child itself if a
    prometheus_client release lays its internals out differently."""

    __slots__ = ("add",)

    def __init__(self, add: Callable[[float], None]) -> None:
        self.add = add

    @classmethod
    def of(cls, child: Any) -> Any:
        add = getattr(getattr(child, "_value", None), "inc", None)
        return cls(add) if callable(add) else child

    def inc(self, amount: float = 1) -> None:
        self.add(amount)


class _FastHistogram:
    """A histogram child's ``observe``: the sum, then the bucket found by bisection instead of
    prometheus_client's Python loop over up to 16 bounds (the first bound >= the amount, as
    there; the last bound is +Inf)."""

    __slots__ = ("add_sum", "buckets", "bounds")

    def __init__(
        self, add_sum: Callable[[float], None], buckets: list[Callable[[float], None]], bounds: list[float]
    ) -> None:
        self.add_sum, self.buckets, self.bounds = add_sum, buckets, bounds

    @classmethod
    def of(cls, child: Any) -> Any:
        add_sum: Any = getattr(getattr(child, "_sum", None), "inc", None)
        buckets: list[Any] = [getattr(b, "inc", None) for b in getattr(child, "_buckets", None) or ()]
        bounds = list(getattr(child, "_upper_bounds", None) or ())
        usable = callable(add_sum) and buckets and all(map(callable, buckets)) and len(buckets) == len(bounds)
        if not usable or bounds[-1] != float("inf"):
            return child
        return cls(add_sum, buckets, bounds)

    def observe(self, amount: float) -> None:
        self.add_sum(amount)
        self.buckets[bisect_left(self.bounds, amount)](1)


LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)

REQUESTS = Counter(
    "gateway_requests",
    "Requests answered on /v1/* (every answer, refusals before authentication "
    "included; model, provider and channel are empty when not known).",
    ("protocol", "model", "provider", "channel", "status"),
)
ERRORS = Counter(
    "gateway_request_errors",
    "Error answers on /v1/* by endpoint (a bounded name: unknown paths are "
    "'other'), HTTP status and error code (e.g. unauthorized, ip_not_allowed, request_too_large).",
    ("protocol", "endpoint", "status", "code"),
)
SHED = Counter(
    "gateway_request_log_shed",
    "Answers to requests without a valid API key counted here and in "
    "gateway_requests but given no request-log row nor access line: reason 'budget' (over "
    "REQUEST_LOG_KEYLESS_PER_SECOND in this worker) or 'queue' (the request-log queue over half full).",
    ("reason",),
)
DURATION = Histogram(
    "gateway_request_duration_seconds",
    "Time from request start to the end of the answer.",
    ("protocol", "stream"),
    buckets=LATENCY_BUCKETS,
)
TTFB = Histogram(
    "gateway_time_to_first_byte_seconds",
    "Time from request start to the first byte sent to the client.",
    ("protocol", "stream"),
    buckets=LATENCY_BUCKETS,
)
ATTEMPTS = Counter(
    "gateway_upstream_attempts",
    "Upstream attempts by outcome (ok, retryable, rate_limited, fatal).",
    ("provider", "channel", "outcome"),
)
RETRIES = Counter(
    "gateway_upstream_retries", "Attempts that retried the same channel.", ("provider", "channel")
)
FAILOVERS = Counter(
    "gateway_upstream_failovers", "Attempts that moved to another channel.", ("provider", "channel")
)
TOKENS = Counter(
    "gateway_tokens",
    "Tokens reported by upstreams, by kind (input, output, cache_read, cache_write, reasoning).",
    ("model", "kind"),
)
COST = Counter(
    "gateway_cost_usd",
    "Cost in USD of the usage upstreams reported, priced as the request logs do "
    "(channel model prices × provider multiplier); requests without reported usage are not counted here.",
    ("model",),
)
TRANSFORM_FAILURES = Counter(
    "gateway_transform_failures", "Requests that failed in a transform rule.", ("transform",)
)
QUEUE_DEPTH = Gauge(
    "gateway_queue_depth",
    "Records waiting in a writer's in-memory queue (captures, request logs).",
    ("queue",),
    multiprocess_mode="livesum",
)
QUEUE_DROPS = Counter(
    "gateway_queue_drops", "Records a writer dropped (queue full, spool full or unwritable).", ("queue",)
)

requests = Children(REQUESTS)
errors = Children(ERRORS)
duration = Children(DURATION)
ttfb = Children(TTFB)
attempts = Children(ATTEMPTS)
retries = Children(RETRIES)
failovers = Children(FAILOVERS)
tokens = Children(TOKENS)
cost = Children(COST)

# name -> () -> (queued now, dropped since start): per-process writers register here
# (``captures`` does in ``gateway.observe.recorder``; request logs can add theirs).
QUEUES: dict[str, Callable[[], tuple[int, int]]] = {}

BREAKER_CODES = {"closed": 0, "half_open": 1, "open": 2}


class BreakerCollector:
    """``gateway_breaker_state{provider,channel}`` (0 closed, 1 half-open, 2 open), read at scrape
    from the answering worker's breaker board and configuration snapshot."""

    def __init__(self, source: Callable[[], Iterable[tuple[str, str, str]]]) -> None:
        self.source = source  # -> (provider, channel, state) for every channel

    def collect(self) -> Iterable[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "gateway_breaker_state",
            "Circuit breaker per channel: 0 closed, 1 half-open, 2 open (the answering worker's view).",
            labels=("provider", "channel"),
        )
        try:
            rows = list(self.source())
        except Exception:  # a scrape must not fail because the snapshot is not loaded yet
            rows = []
        for provider, channel, state in rows:
            family.add_metric((provider, channel), BREAKER_CODES.get(state, 0))
        yield family


class _Scrape:
    """What one scrape collects: every worker's samples in multiprocess mode (else this
    process's registry), then the ``extra`` collectors read at scrape time."""

    def __init__(self, extra: Iterable[Any]) -> None:
        self.extra = tuple(extra)
        if MULTIPROC:
            from prometheus_client import multiprocess

            self.base = CollectorRegistry()
            multiprocess.MultiProcessCollector(self.base)
        else:
            from prometheus_client import REGISTRY

            self.base = REGISTRY

    def collect(self) -> Iterable[Any]:
        yield from self.base.collect()
        for collector in self.extra:
            yield from collector.collect()


def render(extra: Iterable[Any] = ()) -> bytes:
    """The exposition text (see :class:`_Scrape`)."""
    return generate_latest(_Scrape(extra))  # type: ignore[arg-type]


# -- the guard ----------------------------------------------------------------------------------------


IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


def parse_cidrs(text: str) -> tuple[IPNetwork, ...]:
    return tuple(ipaddress.ip_network(c.strip(), strict=False) for c in text.split(",") if c.strip())


def scrape_allowed(
    client_host: str | None, authorization: str | None, *, allow: tuple[IPNetwork, ...], token: str
) -> bool:
    """A scrape is answered when the client's address is in ``allow`` (loopback by default) or it
    carries ``Authorization: Bearer <token>`` matching the configured token. The address is the
    TCP peer's, or, when the peer is a trusted proxy (``GATEWAY_TRUSTED_PROXY_CIDRS``), the
    client its X-Forwarded-For names (``MetricsApp``): a scrape relayed by a local proxy is judged
    by who sent it, not let in as loopback."""
    if token and authorization:
        scheme, _, value = authorization.partition(" ")
        if scheme.lower() == "bearer" and hmac.compare_digest(value.strip().encode(), token.encode()):
            return True
    if not client_host:
        return False
    try:
        addr = ipaddress.ip_address(client_host)
    except ValueError:
        return False
    return any(addr in net for net in allow)


class MetricsApp:
    """``GET /metrics`` as a plain ASGI app (no Django request handling, no ORM per scrape)."""

    def __init__(
        self,
        *,
        allow: tuple[IPNetwork, ...],
        token: str,
        trusted: tuple[IPNetwork, ...] = (),
        extra: Iterable[Any] = (),
    ) -> None:
        self.allow = allow
        self.token = token
        self.trusted = trusted  # proxies whose X-Forwarded-For names the client
        self.scrape = _Scrape(extra)

    async def __call__(self, scope, receive, send) -> None:
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", ())}
        client = client_ip(scope, headers, self.trusted)
        if scope.get("method") not in ("GET", "HEAD"):
            await _answer(send, 405, b"method not allowed\n")
        elif not scrape_allowed(client, headers.get("authorization"), allow=self.allow, token=self.token):
            await _answer(
                send,
                403,
                b"forbidden: /metrics needs a loopback or allow-listed address, "
                b"or Authorization: Bearer <GATEWAY_METRICS_TOKEN>\n",
            )
        else:
            await _answer(send, 200, generate_latest(self.scrape), CONTENT_TYPE_LATEST.encode())


async def _answer(send, status: int, body: bytes, content_type: bytes = b"text/plain; charset=utf-8") -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", content_type), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})
