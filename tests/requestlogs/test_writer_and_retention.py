"""The in-process writer (no Redis): rows persist off the calling thread in one batch, a failed
delivery is spooled and retried with nothing lost and nothing doubled; retention by age, from the
beat task and the management command."""

from __future__ import annotations

import io
import time

import pytest
from django.core.management import call_command

from requestlogs import sink, store, tasks
from requestlogs.models import RequestLog
from tests.requestlogs.test_api import row

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def spool(tmp_path, settings):
    settings.DATA_DIR = tmp_path
    settings.REDIS_URL = ""
    return tmp_path / "requestlog-spool"


def test_rows_persist_in_one_batch(spool, monkeypatch):
    batches = []
    real = store.save_rows
    monkeypatch.setattr(store, "save_rows", lambda rows: batches.append(len(rows)) or real(rows))
    writer = sink.Writer()
    writer._handle([row(f"b{i}", created_at=time.time()) for i in range(5)])
    assert batches == [5] and RequestLog.objects.count() == 5


def test_failed_delivery_is_spooled_then_delivered_once(spool, monkeypatch):
    real = sink.Writer.deliver
    state = {"down": True}

    def flaky(self, rows):
        if state["down"]:
            raise ConnectionError("database locked")
        return real(self, rows)

    monkeypatch.setattr(sink.Writer, "deliver", flaky)
    spooled = sink.stats().get("spooled", 0)
    sink.submit(row("s1", created_at=time.time()))
    sink.submit(row("s2", created_at=time.time()))
    assert sink.writer.flush(10)
    assert sink.stats()["spooled"] == spooled + 2 and not RequestLog.objects.exists()
    assert len(list(spool.glob("*.row"))) == 2
    state["down"] = False
    deadline = time.monotonic() + 30
    while RequestLog.objects.count() < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sorted(RequestLog.objects.values_list("request_id", flat=True)) == ["s1", "s2"]
    # a spool file delivered a second time (an adopted claim) does not double the row
    store.save_rows([row("s1", created_at=time.time())])
    assert RequestLog.objects.filter(request_id="s1").count() == 1


def test_retention_by_age_task_and_command(spool, settings):
    now = time.time()
    store.save_rows([row("old", created_at=now - 91 * 86400), row("new", created_at=now - 89 * 86400)])
    assert tasks.enforce_retention() == 1
    assert list(RequestLog.objects.values_list("request_id", flat=True)) == ["new"]
    out = io.StringIO()
    call_command("purgerequestlogs", "--days", "30", stdout=out)
    assert "deleted 1 request-log row(s)" in out.getvalue() and not RequestLog.objects.exists()
    settings.GATEWAY = {**settings.GATEWAY, "REQUEST_LOG_RETENTION_DAYS": 400}
    store.save_rows([row("kept", created_at=now - 399 * 86400)])
    call_command("purgerequestlogs", stdout=io.StringIO())
    assert RequestLog.objects.filter(request_id="kept").exists()
