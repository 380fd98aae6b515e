"""The observe recorder without a server: transform failures are counted by transform, the
live tail publishes nothing while nobody watches, and label values are capped."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

from gateway.observe import live, metrics, recorder


@pytest.fixture(autouse=True)
def _no_poll(monkeypatch):
    monkeypatch.setattr(live, "poll_checked", True)


def _finish(error: str | None, status: int = 500) -> None:
    ex = SimpleNamespace(
        request_id="r1",
        protocol="chat_completion",
        endpoint="/v1/chat/completions",
        t0=time.perf_counter(),
        status=status,
    )
    rec = recorder.observe_recorder(ex, None, SimpleNamespace(name="k"), b"")
    rec.on_finish(ex, error)


def _value(metric, *labels: str) -> float:
    return metric.labels(*labels)._value.get()


def test_transform_failures_by_transform():
    before = _value(metrics.TRANSFORM_FAILURES, "inject_system")
    _finish("transform_apply_failed: transform apply failed: transform inject_system failed: KeyError")
    assert _value(metrics.TRANSFORM_FAILURES, "inject_system") == before + 1
    before = _value(metrics.TRANSFORM_FAILURES, "gone_plugin")
    _finish("transform_init_failed: transform 'gone_plugin' could not be initialised: unknown id")
    assert _value(metrics.TRANSFORM_FAILURES, "gone_plugin") == before + 1
    before = _value(metrics.TRANSFORM_FAILURES, "unknown")
    _finish("transform_apply_failed: transform apply failed: the rule's own words")
    _finish("upstream_error: boom")
    assert _value(metrics.TRANSFORM_FAILURES, "unknown") == before + 1


def test_live_tail_is_silent_without_viewers(monkeypatch):
    sent: list[dict] = []
    monkeypatch.setattr(live, "publish", sent.append)
    monkeypatch.setattr(live, "viewers", 0)
    monkeypatch.setattr(live, "remote_viewers", False)
    _finish(None, 200)
    assert sent == []
    monkeypatch.setattr(live, "viewers", 1)
    _finish(None, 200)
    assert [e["phase"] for e in sent] == ["end"] and sent[0]["status"] == 200


def test_label_values_are_capped(monkeypatch):
    monkeypatch.setitem(metrics._seen, "model", set())
    monkeypatch.setattr(metrics, "MAX_LABEL_VALUES", 3)
    assert [metrics.capped("model", f"m{i}") for i in range(5)] == ["m0", "m1", "m2", "other", "other"]
    assert metrics.capped("model", "m1") == "m1"
