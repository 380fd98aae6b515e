"""Retention by age and by total size (oldest first), through the task and the command."""

from __future__ import annotations

import os
import time
from io import StringIO

import pytest
from django.core.management import call_command

from captures.models import Capture
from captures.tasks import enforce_retention
from gateway.models import GlobalSettings
from tests.captures.helpers import record, stored

pytestmark = pytest.mark.django_db
DAY = 86400.0


def test_captures_past_retention_days_are_deleted():
    gs = GlobalSettings.load()
    gs.capture_retention_days = 2
    gs.save()
    now = time.time()
    stored(record("old"), created_at=now - 3 * DAY)
    stored(record("edge"), created_at=now - 2 * DAY + 60)
    stored(record("new"), created_at=now)
    out = StringIO()
    call_command("purgecaptures", stdout=out)
    assert sorted(Capture.objects.values_list("request_id", flat=True)) == ["edge", "new"]
    assert "deleted 1 capture(s) by age" in out.getvalue()


def test_total_size_budget_deletes_oldest_first():
    gs = GlobalSettings.load()
    gs.capture_retention_days = 30
    gs.capture_max_total_mb = 1
    gs.save()
    now = time.time()
    for n in range(8):
        rec = record(f"c{n}")
        rec.client_request = {"blob": os.urandom(200_000).hex()}  # ~230 KB compressed
        stored(rec, created_at=now - 600 + n)
    sizes = dict(Capture.objects.values_list("request_id", "size_bytes"))
    assert sum(sizes.values()) > 1024 * 1024
    result = enforce_retention()
    kept = list(Capture.objects.order_by("created_at").values_list("request_id", flat=True))
    assert result["by_size"] == 8 - len(kept) > 0 and result["by_age"] == 0
    assert kept == [f"c{n}" for n in range(8 - len(kept), 8)]  # the newest survive
    assert sum(Capture.objects.values_list("size_bytes", flat=True)) <= 1024 * 1024


def test_nothing_to_do_deletes_nothing():
    stored(record("fresh"))
    assert enforce_retention() == {"by_age": 0, "by_size": 0}
    assert Capture.objects.count() == 1
