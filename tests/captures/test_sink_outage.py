"""Issue 13: a broker or database outage must not lose captures. Publishing fails fast and a
circuit sends whole batches to the spool; the queue drains to the spool on shutdown; every spool
file (even what a killed process left) is picked up on start; a capture that can never be
written is retried with backoff, then dead-lettered so the others flow.

No shared Redis is stopped: the broker is a port with nothing listening, or a tiny TCP server
that accepts connections and never answers (a hung Redis)."""

from __future__ import annotations

import io
import os
import socket
import threading
import time

import orjson
import pytest
from celery import Celery
from django.core.management import call_command

from captures import sink
from captures.dump import compress
from captures.models import Capture
from tests.captures.helpers import record

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def spool(tmp_path, settings):
    settings.DATA_DIR = tmp_path
    settings.REDIS_URL = ""
    return tmp_path / "capture-spool"


class BlackHole:
    """Accepts TCP connections and never answers; counts them."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.accepted: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted.append(conn)

    def close(self) -> None:
        self.sock.close()
        for c in self.accepted:
            c.close()


@pytest.fixture
def black_hole():
    hole = BlackHole()
    yield hole
    hole.close()


def broker_writer(settings, url: str) -> sink.Writer:
    settings.REDIS_URL = url
    writer = sink.Writer()
    writer._celery = sink.configure_fail_fast(Celery("outage-test", broker=url), timeout=0.5)
    return writer


def run_bounded(fn, seconds: float) -> bool:
    """Run ``fn`` in a thread; True when it returned within ``seconds`` (a hung publish would not)."""
    t = threading.Thread(target=fn, daemon=True)
    t.start()
    t.join(seconds)
    return not t.is_alive()


def spool_files(spool):
    return sorted(p for p in spool.iterdir() if p.suffix == ".cap") if spool.exists() else []


def test_silent_broker_fails_fast_and_batches_go_to_the_spool(spool, settings, black_hole):
    writer = broker_writer(settings, f"redis://127.0.0.1:{black_hole.port}/0")
    spooled = sink.stats().get("spooled", 0)
    assert run_bounded(lambda: writer._handle([record(f"bh-{i}") for i in range(20)]), 15)
    assert len(spool_files(spool)) == 20 and sink.stats()["spooled"] == spooled + 20
    first = len(black_hole.accepted)
    assert 1 <= first <= 3  # one publish tried, not one per capture
    # the circuit is open: later batches go to the spool without touching the broker
    assert run_bounded(lambda: writer._handle([record(f"bh2-{i}") for i in range(20)]), 5)
    assert len(spool_files(spool)) == 40 and len(black_hole.accepted) == first
    for p in spool_files(spool):
        assert p.stat().st_mode & 0o077 == 0  # spool files are private from the start


def test_refused_broker_opens_the_circuit(spool, settings):
    from tests.servers import free_port

    writer = broker_writer(settings, f"redis://127.0.0.1:{free_port()}/0")
    outages = sink.stats().get("outages", 0)
    assert run_bounded(lambda: writer._handle([record("r-1"), record("r-2")]), 10)
    assert writer.paused() and sink.stats()["outages"] == outages + 1
    assert len(spool_files(spool)) == 2


def test_shutdown_drains_the_queue_to_the_spool(spool, settings, black_hole):
    writer = broker_writer(settings, f"redis://127.0.0.1:{black_hole.port}/0")
    for i in range(30):
        writer.queue.put_nowait(record(f"sd-{i}"))  # no writer thread: as if it were stuck
    before = sink.stats().get("spooled_at_shutdown", 0)
    assert run_bounded(lambda: writer.shutdown(1.0), 10)
    assert len(spool_files(spool)) == 30
    assert sink.stats()["spooled_at_shutdown"] == before + 30
    assert writer.queue.unfinished_tasks == 0


def _spool_entry(request_id: str, **meta_over) -> bytes:
    meta = {
        "request_id": request_id,
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
        **meta_over,
    }
    return orjson.dumps(meta) + b"\n" + compress(b"{}")


def _dead_pid() -> int:
    pid = 999_999
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return pid
        except PermissionError:
            pass
        pid -= 1


def test_start_picks_up_what_a_killed_process_left(spool):
    spool.mkdir(parents=True)
    pid = _dead_pid()
    (spool / f"00000000000000000001-{pid}-a.claim{pid}").write_bytes(_spool_entry("claimed-by-dead"))
    tmp = spool / f"00000000000000000002-{pid}-b.tmp"
    tmp.write_bytes(_spool_entry("half-renamed"))
    old = time.time() - 120
    os.utime(tmp, (old, old))
    writer = sink.Writer()
    writer.start()
    deadline = time.monotonic() + 20
    while Capture.objects.count() < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sorted(Capture.objects.values_list("request_id", flat=True)) == ["claimed-by-dead", "half-renamed"]


def test_a_capture_that_can_never_be_written_is_dead_lettered_and_others_flow(spool, monkeypatch):
    monkeypatch.setattr(sink.Writer, "dead_letter_after", 2)
    spool.mkdir(parents=True)
    (spool / "00000000000000000001-1-bad.cap").write_bytes(_spool_entry("bad", created_at="not a time"))
    (spool / "00000000000000000002-1-good.cap").write_bytes(_spool_entry("good"))
    writer = sink.Writer()
    assert writer.retry_spool() == 1  # the good one is not stuck behind the bad one
    assert list(Capture.objects.values_list("request_id", flat=True)) == ["good"]
    assert [p.name for p in spool_files(spool)] == ["00000000000000000001-1-bad.cap"]
    assert not writer._spool_pending()  # backing off: new captures are not sent to the spool for it
    writer._failures = {k: (n, 0.0) for k, (n, _at) in writer._failures.items()}  # backoff elapsed
    dead = sink.stats().get("dead_lettered", 0)
    writer.retry_spool()
    assert spool_files(spool) == [] and sink.stats()["dead_lettered"] == dead + 1
    assert [p.name for p in (spool / "dead").iterdir()] == ["00000000000000000001-1-bad.cap"]
    out = io.StringIO()
    call_command("capturespool", stdout=out)
    assert "dead-lettered: 1" in out.getvalue() and "bad.cap" in out.getvalue()
    call_command("capturespool", "--requeue", stdout=io.StringIO())
    assert [p.name for p in spool_files(spool)] == ["00000000000000000001-1-bad.cap"]


def _spooled_during_an_outage(settings, spool, n: int) -> sink.Writer:
    """A writer whose broker refused a batch of ``n`` captures: all spooled, the circuit open
    (for the 5 s cooldown); then the broker is back (a live Redis database of the tests')."""
    from tests.captures.conftest import redis_or_skip
    from tests.servers import free_port

    live = os.environ.get("SPARE_REDIS_URL_FOR_TESTS", "redis://127.0.0.1:6379/13")
    redis_or_skip(live)
    writer = broker_writer(settings, f"redis://127.0.0.1:{free_port()}/0")
    assert run_bounded(lambda: writer._handle([record(f"back-{i}") for i in range(n)]), 10)
    assert writer.paused() and len(spool_files(spool)) == n
    import redis

    redis.Redis.from_url(live).flushdb()
    settings.REDIS_URL = live
    writer._celery = sink.configure_fail_fast(Celery("outage-test-back", broker=live), timeout=0.5)
    return writer


def _drained(spool, seconds: float) -> float | None:
    t0 = time.monotonic()
    while spool_files(spool) or list(spool.glob("*.claim*")):
        if time.monotonic() - t0 > seconds:
            return None
        time.sleep(0.02)
    return time.monotonic() - t0


def test_the_spool_drains_within_a_probe_of_the_brokers_return(spool, settings):
    """Issue 13: after a Redis outage the backlog waited out the circuit's cooldown (5 s, restarted
    by every failed try) before a single retry; the writer now pings the broker while the circuit
    is open and delivers the spool as soon as it answers."""
    writer = _spooled_during_an_outage(settings, spool, 20)
    writer._start()
    took = _drained(spool, 10)
    assert took is not None and took < 2.0, took  # a probe every 0.25 s, not the 5 s cooldown


def test_a_spooled_backlog_is_published_in_batches(spool, settings):
    """One Celery task per batch of spooled captures, not one per capture: a backlog of a
    thousand took the worker tens of seconds at one task (and one size-budget query) each."""
    import redis

    writer = _spooled_during_an_outage(settings, spool, 100)
    writer.paused_until = 0.0  # the broker answered
    assert writer.retry_spool() == 100 and spool_files(spool) == []
    assert redis.Redis.from_url(settings.REDIS_URL).llen(sink.TASK_QUEUE) == 2  # 64 + 36
