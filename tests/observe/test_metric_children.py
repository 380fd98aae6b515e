"""The recorder's metric children (``metrics.Children``) count exactly what prometheus_client's own
``inc`` and ``observe`` count: the same exposition for the same calls, bucket bounds included."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from gateway.observe.metrics import LATENCY_BUCKETS, Children


def _samples(registry) -> list[bytes]:
    """The exposition without the ``_created`` timestamps (when each child was made)."""
    return [line for line in generate_latest(registry).splitlines() if b"_created" not in line]


def _pair(kind, **kw):
    fast, plain = CollectorRegistry(), CollectorRegistry()
    return (
        fast,
        plain,
        Children(kind("m", "doc", ("a",), registry=fast, **kw)),
        kind("m", "doc", ("a",), registry=plain, **kw),
    )


def test_counter_children_count_as_prometheus_client_does():
    fast, plain, children, metric = _pair(Counter)
    for label, amount in (("x", 1), ("x", 2.5), ("y", 0), ("x", 1e9)):
        children(label).inc(amount)
        metric.labels(label).inc(amount)
    children("y").inc()
    metric.labels("y").inc()
    assert _samples(fast) == _samples(plain)
    assert children("x") is children("x")  # made once per label values


def test_histogram_children_bucket_as_prometheus_client_does():
    fast, plain, children, metric = _pair(Histogram, buckets=LATENCY_BUCKETS)
    amounts = [0.0, 0.004, 0.005, 0.0050001, 0.3, 1.0, 299.9, 300.0, 300.1, 1e12, *LATENCY_BUCKETS]
    for amount in amounts:
        children("s").observe(amount)
        metric.labels("s").observe(amount)
    assert _samples(fast) == _samples(plain)


def test_other_metrics_are_their_own_children():
    registry = CollectorRegistry()
    gauge = Gauge("g", "doc", ("a",), registry=registry)
    assert Children(gauge)("x") is gauge.labels("x")
