"""The answers no pipeline recorder followed, without a server: the keyless budget (token bucket),
shedding when the request-log queue is half full, and the recorders an answer gets."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

from gateway.observe import live, metrics, unrecorded
from gateway.observe.recorder import ObserveRecorder
from gateway.proxy.recorder import Recorder, RecorderSet


@pytest.fixture(autouse=True)
def _no_poll(monkeypatch):
    monkeypatch.setattr(live, "poll_checked", True)


class Row(Recorder):
    __slots__ = ("finished",)

    def __init__(self) -> None:
        self.finished: list[str | None] = []

    def on_finish(self, ex, error) -> None:
        self.finished.append(error)


def _ex(**kw):
    base = {
        "request_id": "r1",
        "protocol": "chat_completion",
        "endpoint": "other",
        "t0": time.perf_counter(),
        "status": 404,
        "key": None,
        "error": None,
        "recorded": False,
    }
    return SimpleNamespace(**{**base, **kw})


def _shed(reason: str) -> float:
    return metrics.SHED.labels(reason)._value.get()


def test_budget_is_a_token_bucket(monkeypatch):
    now = [100.0]
    monkeypatch.setattr(unrecorded.time, "monotonic", lambda: now[0])
    budget = unrecorded.KeylessBudget(2.0)
    assert [budget.take() for _ in range(3)] == [True, True, False]  # a burst of one second's worth
    now[0] += 0.5
    assert [budget.take(), budget.take()] == [True, False]  # refilled at 2 per second
    now[0] += 60
    assert sum(budget.take() for _ in range(10)) == 2  # never more than the burst
    assert not unrecorded.KeylessBudget(0).take()
    assert all(unrecorded.KeylessBudget(-1).take() for _ in range(1000))


def test_keyless_answers_beyond_the_budget_are_counted_not_written():
    rows: list[Row] = []

    def row(ex, key):
        rows.append(Row())
        return rows[-1]

    factory = unrecorded.unrecorded_factory(keyless_per_second=1, logged=row, queue_busy=lambda: False)
    before = _shed("budget")
    first = factory(_ex(), None)
    second = factory(_ex(), None)
    assert first is rows[0] and len(rows) == 1
    assert isinstance(second, ObserveRecorder) and second.quiet and len(rows) == 1
    assert _shed("budget") == before + 1
    keyed = factory(_ex(), SimpleNamespace(name="k", id=1))  # a key holder's answers are never sampled
    assert keyed is rows[1] and len(rows) == 2


def test_keyless_rows_give_way_when_the_queue_is_half_full():
    factory = unrecorded.unrecorded_factory(
        keyless_per_second=-1, logged=lambda ex, key: Row(), queue_busy=lambda: True
    )
    before = _shed("queue")
    rec = factory(_ex(), None)
    assert isinstance(rec, ObserveRecorder) and rec.quiet and _shed("queue") == before + 1
    keyed = factory(_ex(), SimpleNamespace(name="k", id=1))
    assert isinstance(keyed, Row)


def test_without_request_logs_every_answer_gets_the_observe_recorder():
    factory = unrecorded.unrecorded_factory(keyless_per_second=-1, logged=None, queue_busy=lambda: True)
    keyless, keyed = factory(_ex(), None), factory(_ex(), SimpleNamespace(name="k", id=1))
    assert type(keyless) is ObserveRecorder and not keyless.quiet
    assert type(keyed) is ObserveRecorder and keyed.key == "k"


def test_finish_unrecorded_passes_the_error_and_runs_once():
    row = Row()
    recorders = RecorderSet((), lambda ex, key: row)
    ex = _ex(error=SimpleNamespace(code="unauthorized", message="invalid or missing API key"))
    recorders.finish_unrecorded(ex)
    assert row.finished == ["unauthorized: invalid or missing API key"] and ex.recorded
    RecorderSet().finish_unrecorded(_ex())  # nothing wired: nothing happens

    def broken(ex, key):
        raise RuntimeError("boom")

    RecorderSet((), broken).finish_unrecorded(_ex())  # never raises into the proxy


def test_error_answers_are_counted_by_endpoint_and_code():
    labels = ("chat_completion", "other", "404", "not_found")
    before = metrics.ERRORS.labels(*labels)._value.get()
    ex = _ex(error=SimpleNamespace(code="not_found", message="no such endpoint"))
    ObserveRecorder(ex, "", quiet=True).on_finish(ex, "not_found: no such endpoint")
    assert metrics.ERRORS.labels(*labels)._value.get() == before + 1
