"""What was published just before a broker outage is delivered again, and stored once.

A Celery worker's consumer can lose a message the broker had already handed it when the broker
stops at that instant (kombu's Redis transport records it as unacked in a second round trip):
the resilience test saw 4 request-log rows of 1,376 go missing that way. The hand-off therefore
spools again, when its circuit opens, what it published in the last ``resend_seconds``; the
writes skip ids already stored, so nothing is doubled."""

from __future__ import annotations

import os

import pytest
from celery import Celery

from captures import sink, store
from captures.models import Capture
from requestlogs import sink as log_sink
from requestlogs import store as log_store
from requestlogs.models import RequestLog
from tests.captures.helpers import record
from tests.captures.test_sink_outage import run_bounded, spool_files

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def live_redis(tmp_path, settings):
    from tests.captures.conftest import redis_or_skip

    url = os.environ.get("SPARE_REDIS_URL_FOR_TESTS", "redis://127.0.0.1:6379/13")
    redis_or_skip(url)
    import redis

    redis.Redis.from_url(url).flushdb()
    settings.DATA_DIR = tmp_path
    settings.REDIS_URL = url
    return url


def _point_at(writer, url: str, name: str) -> None:
    writer._celery = sink.configure_fail_fast(Celery(name, broker=url), timeout=0.5)


def test_the_batches_published_before_an_outage_are_spooled_again(live_redis, settings, tmp_path):
    from tests.servers import free_port

    writer = sink.Writer()
    _point_at(writer, live_redis, "resend-up")
    writer._handle([record("before-1"), record("before-2")])  # published (the broker may lose it)
    assert spool_files(tmp_path / "capture-spool") == []

    _point_at(writer, f"redis://127.0.0.1:{free_port()}/0", "resend-down")  # the broker stops
    assert run_bounded(lambda: writer._handle([record("during-1")]), 10)
    assert writer.paused()
    spooled = [
        writer.decode_spool(p.read_bytes())[0]["request_id"] for p in spool_files(tmp_path / "capture-spool")
    ]
    assert sorted(spooled) == ["before-1", "before-2", "during-1"]
    assert not writer._published  # sent again once, not at every trip


def test_nothing_is_kept_without_a_broker(settings, tmp_path):
    settings.DATA_DIR = tmp_path
    settings.REDIS_URL = ""
    writer = sink.Writer()
    writer._handle([record("local-1")])  # written here, in one transaction: nothing to resend
    assert not writer._published and Capture.objects.filter(request_id="local-1").count() == 1


def test_old_publishes_are_forgotten(live_redis, monkeypatch):
    writer = log_sink.Writer()
    _point_at(writer, live_redis, "resend-old")
    clock = [1000.0]
    monkeypatch.setattr("gateway.handoff.time.monotonic", lambda: clock[0])
    writer._deliver([{"request_id": "old"}])
    clock[0] += writer.resend_seconds + 0.5
    writer._deliver([{"request_id": "new"}])
    kept = [p["request_id"] for _, batch in writer._published for p in batch]
    assert kept == ["new"]


def test_a_capture_delivered_twice_is_stored_once():
    rows = [_prepared("twice-1"), _prepared("twice-2")]
    assert store.save_many(list(rows)) == 2
    assert store.save_many(list(rows) + [_prepared("twice-3"), _prepared("twice-3")]) == 1
    assert sorted(Capture.objects.values_list("request_id", flat=True)) == ["twice-1", "twice-2", "twice-3"]


def test_a_request_log_row_delivered_twice_is_stored_once():
    row = {"request_id": "log-twice", "status": "success", "created_at": 1_700_000_000.0}
    log_store.save_rows([dict(row)])
    log_store.save_rows([dict(row)])
    assert RequestLog.objects.filter(request_id="log-twice").count() == 1


def _prepared(request_id: str) -> tuple[dict, bytes]:
    return sink.Writer().prepare(record(request_id))
