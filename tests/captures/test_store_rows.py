"""The batch insert (``store.save_many``, what the writers use) stores exactly the row that the
single-capture ORM path (``store.save``) stores for the same metadata and blob."""

from __future__ import annotations

import time

import pytest
from django.db import transaction

from captures import dump, store
from captures.models import Capture
from tests.captures.helpers import record

pytestmark = pytest.mark.django_db

FIELDS = [f.attname for f in Capture._meta.concrete_fields if not f.primary_key]


def _key(name: str):
    from keys.models import ApiKey

    key = ApiKey(name=name)
    key.set_secret()
    key.save()
    return key


def test_batch_rows_equal_single_rows_field_for_field():
    key = _key("k-batch")
    gone = _key("k-gone")
    rows = []
    for n, (k, status) in enumerate([(key, 200), (None, 502), (gone, 429)]):
        rec = record(f"same-{n}", key=k, status=status, client_request_id=f"client-{n}")
        rec.created_at = time.time() - n * 3600.5
        data, meta = dump.build(rec)
        rows.append((meta.as_dict(), dump.compress(data)))
    gone.delete()  # a key deleted between the request and the write: the capture is kept
    with transaction.atomic():
        assert store.save_many([(dict(m, request_id="batch-" + m["request_id"]), b) for m, b in rows]) == 3
    for meta, blob in rows:
        single = store.save(meta, blob)
        batch = Capture.objects.get(request_id="batch-" + meta["request_id"])
        single.refresh_from_db()
        for name in FIELDS:
            want = getattr(single, name)
            got = getattr(batch, name)
            if name == "request_id":
                want = "batch-" + want
            if name == "payload":
                want, got = bytes(want), bytes(got)
            assert got == want, name
        assert orjson_loads(batch.dump_bytes())["request_id"] == meta["request_id"]
    assert Capture.objects.get(request_id="batch-same-2").api_key_id is None


def test_an_empty_batch_writes_nothing():
    assert store.save_many([]) == 0
    assert Capture.objects.count() == 0


def test_a_model_name_with_a_nul_character_is_stored_with_a_replacement():
    """PostgreSQL refuses NUL in text: a capture of a request naming such a model failed its
    batch; both paths store U+FFFD in its place, on every backend."""
    rows = []
    for n in range(2):
        rec = record(f"nul-{n}", status=404)
        data, meta = dump.build(rec)
        rows.append((dict(meta.as_dict(), logical_model="no\x00such"), dump.compress(data)))
    with transaction.atomic():
        assert store.save_many(rows[:1]) == 1
    store.save(*rows[1])
    assert set(Capture.objects.values_list("logical_model", flat=True)) == {"no\ufffdsuch"}


def test_the_celery_task_stores_the_rest_of_a_batch_one_capture_cannot_join(caplog):
    """One capture that cannot be stored (a timestamp that is no number, as an old spool file
    could hold) cost every capture of its task; the task now stores the others one by one."""
    import base64

    from captures.tasks import persist_captures

    items = []
    for n in range(3):
        data, meta = dump.build(record(f"task-{n}"))
        items.append([meta.as_dict(), base64.b64encode(dump.compress(data)).decode()])
    items[1][0]["created_at"] = "not a time"
    with caplog.at_level("ERROR", logger="captures"):
        assert persist_captures(items) == 2
    assert set(Capture.objects.values_list("request_id", flat=True)) == {"task-0", "task-2"}
    assert "request_id=task-1" in caplog.text


def orjson_loads(data: bytes):
    import orjson

    return orjson.loads(data)
