"""The writer without Redis: submit never blocks, the writer thread persists, a failed delivery
is spooled and retried, and every drop is counted."""

from __future__ import annotations

import re
import threading
import time

import pytest

from captures import sink
from captures.models import Capture
from tests.captures.helpers import record

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def spool(tmp_path, settings):
    settings.DATA_DIR = tmp_path
    settings.REDIS_URL = ""
    return tmp_path / "capture-spool"


def test_submit_persists_off_the_calling_thread(spool):
    from keys.models import ApiKey

    key = ApiKey(name="k")
    key.set_secret()
    key.save()
    before = sink.stats().get("persisted", 0)
    sink.submit(record("bg-1", key=key))
    assert sink.writer.flush(10)
    cap = Capture.objects.get(request_id="bg-1")
    assert cap.api_key_id == key.pk and cap.api_key_name == key.name and cap.attempt_count == 1
    assert sink.stats()["persisted"] == before + 1
    assert sink.writer.thread is not threading.current_thread()


def test_failed_delivery_is_spooled_then_retried(spool, monkeypatch):
    real = sink.Writer.deliver
    calls = {"fail": True}

    def flaky(self, rows):
        if calls["fail"]:
            raise ConnectionError("broker down")
        return real(self, rows)

    monkeypatch.setattr(sink.Writer, "deliver", flaky)
    spooled = sink.stats().get("spooled", 0)
    sink.submit(record("spool-1"))
    sink.submit(record("spool-2"))
    assert sink.writer.flush(10)
    assert sink.stats()["spooled"] == spooled + 2
    assert len(list(spool.iterdir())) == 2 and not Capture.objects.exists()  # (a file may be mid-retry)
    calls["fail"] = False  # "the broker is back": the writer's periodic retry delivers them
    deadline = time.monotonic() + 30
    while Capture.objects.count() < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sorted(Capture.objects.values_list("request_id", flat=True)) == ["spool-1", "spool-2"]
    assert sink.writer.flush(10) and list(spool.iterdir()) == []


def test_full_queue_drops_are_counted_and_logged(spool, monkeypatch, caplog):
    writer = sink.Writer()
    writer.queue.maxsize = 1
    monkeypatch.setattr(writer, "_start", lambda: None)  # no thread: the queue stays full
    writer.thread = threading.current_thread()
    dropped = sink.stats().get("dropped", 0)
    writer.submit(record("q1"))
    writer.submit(record("q2"))
    assert sink.stats()["dropped"] == dropped + 1
    assert "capture dropped: writer queue full" in caplog.text


def test_a_forked_child_starts_its_own_writer(spool, monkeypatch):
    from gateway import handoff

    writer = sink.Writer()
    started = []
    monkeypatch.setattr(writer, "_start", lambda: started.append(1))
    writer.running = True  # the parent's writer thread runs
    writer.submit(record("f1"))
    assert started == []
    handoff._after_fork()  # what os.register_at_fork runs in the child
    assert not writer.running
    writer.submit(record("f2"))
    assert started == [1] and writer.queue.qsize() == 2


def test_a_writer_thread_that_ended_is_started_again(spool):
    writer = sink.Writer()
    writer.queue.put(record("e1"))
    writer.closing = True
    real_loop = writer._loop
    writer._loop = lambda: None  # the thread ends at once
    writer._start()
    writer.thread.join(5)
    assert not writer.running
    writer._loop = real_loop
    writer.closing = False
    writer.submit(record("e2"))
    assert writer.running and writer.flush(10)
    assert sorted(Capture.objects.values_list("request_id", flat=True)) == ["e1", "e2"]


def test_a_record_that_cannot_be_built_is_counted(spool, caplog):
    rec = record("bad")
    rec.client_request = {"x": object()}  # not JSON-able
    dropped = sink.stats().get("dropped", 0)
    sink.submit(rec)
    assert sink.writer.flush(10)
    assert sink.stats()["dropped"] == dropped + 1 and "could not build" in caplog.text


def test_a_dead_process_claim_is_taken_back(spool):
    import os

    spool.mkdir(parents=True)
    orphan = spool / "00000000000000000001-999999-orphan.claim999999"
    meta = {
        "request_id": "orphan",
        "created_at": time.time(),
        "api_key_id": None,
        "api_key_name": "",
        "client_protocol": "chat_completion",
        "stream": False,
        "logical_model": "m",
        "status": 200,
        "is_error": False,
        "attempt_count": 1,
        "raw_bytes": 2,
        "truncated": False,
    }
    from captures.dump import compress

    orphan.write_bytes(__import__("orjson").dumps(meta) + b"\n" + compress(b"{}"))
    live = os.getppid()  # a claim of a process that is alive and recent is left alone
    fresh = spool / f"00000000000000000002-{live}-fresh.claim{live}"
    fresh.write_bytes(orphan.read_bytes())
    old = time.time() - sink.CLAIM_TTL - 10
    os.utime(orphan, (old, old))
    assert sink.Writer().retry_spool() == 1
    assert list(Capture.objects.values_list("request_id", flat=True)) == ["orphan"]
    assert [p.name for p in spool.iterdir()] == [fresh.name]  # a live claim is left alone


def test_waiting_captures_are_written_together_and_one_bad_row_costs_only_itself(spool, monkeypatch):
    from captures import store

    real_save = store.save_many
    transactions = []

    def save(rows):
        if any(meta["request_id"] == "batch-bad" for meta, _ in rows):
            raise ValueError("this row cannot be written")
        return real_save(rows)

    real_rows = sink.Writer._save_rows

    def save_rows(self, rows):
        transactions.append([meta["request_id"] for meta, _ in rows])
        return real_rows(self, rows)

    monkeypatch.setattr(store, "save_many", save)
    monkeypatch.setattr(sink.Writer, "_save_rows", save_rows)
    writer = sink.Writer()
    writer._handle([record("batch-1"), record("batch-2")])
    assert transactions == [["batch-1", "batch-2"]]  # one transaction for both
    transactions.clear()
    writer._handle([record("batch-3"), record("batch-bad"), record("batch-4")])
    # the batch failed as a whole (nothing half-written), then each row went alone
    assert transactions == [["batch-3", "batch-bad", "batch-4"], ["batch-3"], ["batch-bad"], ["batch-4"]]
    assert sorted(Capture.objects.values_list("request_id", flat=True)) == [
        "batch-1",
        "batch-2",
        "batch-3",
        "batch-4",
    ]
    assert [p.suffix for p in spool.iterdir()] == [".cap"]  # the bad one waits in the spool, not lost


def test_shutdown_spools_what_the_writer_could_not_drain_in_time(spool, monkeypatch):
    """At shutdown the queue gets ``CAPTURE_FLUSH_SECONDS`` to drain; records still queued then
    are spooled (the next process delivers them), none dropped."""
    writer = sink.Writer()
    gate = threading.Event()
    delivered: list[str] = []

    def slow(self, rows):  # a broker that answers only after the flush timeout
        gate.wait(5)
        delivered.extend(meta["request_id"] for meta, _ in rows)

    monkeypatch.setattr(sink.Writer, "deliver", slow)
    for i in range(5):
        writer.submit(record(f"shut-{i}"))
    time.sleep(0.1)  # the writer thread has taken the first batch and is stuck delivering it
    for i in range(5, 8):
        writer.submit(record(f"shut-{i}"))
    dropped = sink.stats().get("dropped", 0)
    result = writer.shutdown(0.3)
    # a spooled file may already be claimed for redelivery (".claim<pid>" instead of ".cap"): still spooled
    spooled = sorted(re.sub(r"\.(cap|claim\d+)$", "", p.name.split("-", 3)[3]) for p in spool.iterdir())
    assert result == {"queued": 8, "spooled": 3} and spooled == ["shut-5", "shut-6", "shut-7"]
    gate.set()  # the broker answers: the stuck batch lands, then the spool is retried
    deadline = time.monotonic() + 20
    while len(delivered) < 8 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sorted(delivered) == [f"shut-{i}" for i in range(8)]  # each once, none lost
    assert sink.stats().get("dropped", 0) == dropped


def test_shutdown_with_an_idle_writer_does_nothing(spool):
    writer = sink.Writer()
    assert writer.shutdown(0.1) == {"queued": 0, "spooled": 0}
    assert not spool.exists() or list(spool.iterdir()) == []


@pytest.mark.parametrize("gone_at", [1, 2])
def test_a_spool_file_taken_by_another_worker_while_sizing_does_not_drop_the_payload(
    spool, monkeypatch, gone_at
):
    """The workers of an instance share the spool: a file another one claims (renames) between
    this one listing the directory and sizing it must not read as "spool not writable"."""
    from pathlib import Path

    spool.mkdir(parents=True)
    (spool / "00000000000000000001-1-gone.row").write_bytes(b"x" * 10)
    (spool / "00000000000000000002-1-kept.row").write_bytes(b"y" * 7)
    real_stat = Path.stat
    seen: list[str] = []

    def stat(self, *args, **kwargs):  # gone at the first look, or there at the first and gone after
        if self.name.endswith("-gone.row"):
            seen.append(self.name)
            if len(seen) >= gone_at:
                raise FileNotFoundError(2, "claimed by another worker", str(self))
        return real_stat(self, *args, **kwargs)

    monkeypatch.setattr(Path, "stat", stat)
    writer = sink.Writer()
    dropped = writer.stats["dropped"]
    assert writer._used_bytes(spool) in (7, 17)  # gone already, or sized just before it went
    seen.clear()
    writer._spool_used = None
    writer._spool_many([writer.prepare(record("spooled-1"))])
    assert writer.stats["dropped"] == dropped
    assert any("spooled-1" in p.name for p in spool.iterdir())
