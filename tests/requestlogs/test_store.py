"""The batch insert (``requestlogs.store.save_rows``): the rows the recorder builds are stored
as built, column for column, whichever way a row is turned into values (the recorder's complete
rows in one step, any other row column by column); a request id already stored is skipped."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from decimal import Decimal
from types import SimpleNamespace

import pytest

from gateway.proxy.snapshot import ModelPrice
from gateway.urp import Response, Usage
from keys.models import ApiKey
from requestlogs import recorder as rl_recorder
from requestlogs import store
from requestlogs.models import RequestLog
from requestlogs.rowfields import as_dict

pytestmark = pytest.mark.django_db


def built_row(request_id: str, key: ApiKey, *, failed_first: bool = False) -> dict:
    """A row exactly as the recorder builds it (every field, ``None`` where a nullable column has
    no value), as a dict: the Celery task's and the spool's form."""
    return as_dict(built_values(request_id, key, failed_first=failed_first))


def built_values(request_id: str, key: ApiKey, *, failed_first: bool = False) -> tuple:
    """The same row as the writer thread takes it from the recorder (``ROW_FIELDS`` order)."""
    out: list = []
    price = ModelPrice(input=Decimal("3"), output=Decimal("15"), multiplier=Decimal("1"))
    provider = SimpleNamespace(id=4, name="acme")
    channel = SimpleNamespace(id=5, name="main", prices={"m": price})
    att = SimpleNamespace(provider=provider, channel=channel, upstream_model="m-up", affinity=None)
    ex = SimpleNamespace(
        t0=time.perf_counter(),
        request_id=request_id,
        client_request_id=None,
        protocol="chat_completion",
        endpoint="/v1/chat/completions",
        client_ip="10.1.2.3",
        finished=True,
        status=200,
    )
    snap = SimpleNamespace(settings=SimpleNamespace(capture_enabled=False))
    factory = rl_recorder.make_factory(True)
    rec = factory(ex, snap, SimpleNamespace(id=key.pk, name=key.name, capture_mode="off"), b"{}")
    rec.on_request_decoded(SimpleNamespace(logical_model="m", client_stream=False))
    if failed_first:
        rec.on_attempt_start(att)
        rec.on_upstream_response(502, time.perf_counter())
        rec.on_attempt_failed(
            att,
            SimpleNamespace(
                status=502, code="bad_gateway", message="down", rate_limited=False, retryable=True
            ),
            0.0,
        )
    rec.on_attempt_start(att)
    rec.on_upstream_response(200, time.perf_counter())
    rec.on_response(Response(id="r", model="m", usage=Usage(input_tokens=1000, output_tokens=10)), [])
    rec.on_client_response(200, b"{}")
    rec.on_attempt_done(att, time.perf_counter())
    original = rl_recorder.sink.submit
    rl_recorder.sink.submit = lambda rec: out.append(rl_recorder.sink.writer.prepare(rec))
    try:
        rec.on_finish(ex, None)
    finally:
        rl_recorder.sink.submit = original
    return out[0]


@pytest.fixture
def key(django_user_model) -> ApiKey:
    owner = django_user_model.objects.create_user("owner", password="pw-12345678")
    k = ApiKey(name="k1", owner=owner)
    k.set_secret()
    k.save()
    return k


def stored(request_id: str) -> dict:
    return RequestLog.objects.filter(request_id=request_id).values().get()


@pytest.mark.parametrize("form", ["values", "dict"])
def test_rows_written_equal_rows_built(key, form):
    built = [built_values("full-1", key), built_values("full-2", key, failed_first=True)]
    assert store.save_rows(built if form == "values" else [as_dict(v) for v in built]) == 2
    for row in map(as_dict, built):
        got = stored(row["request_id"])
        for name, value in row.items():
            if name == "created_at":
                assert got[name] == datetime.fromtimestamp(value, UTC), name
            else:
                assert got[name] == value, name
        assert got["owner_id"] == key.owner_id
    assert len(stored("full-2")["attempts"]) == 2


def test_the_one_step_and_the_column_by_column_values_agree(key):
    """The recorder's complete rows take the one-step path (from its values tuple or a dict); a
    row from elsewhere (a key missing, ``None`` where the column has a default) is completed
    column by column."""
    plan = store._plan()
    values = built_values("agree", key, failed_first=True)
    row = as_dict(values)

    def plain(values):  # PostgreSQL's JSON adapter wraps the value (psycopg's Jsonb: no ==)
        return [getattr(v, "obj", v) for v in values]

    assert plain(plan.fast(values, 7)) == plain(plan.fast(row, 7)) == plain(plan.slow(row, 7))
    partial = {k: v for k, v in built_row("partial", key).items() if k != "endpoint"}
    partial["error_message"] = None
    store.save_rows([partial])
    got = stored("partial")
    assert got["endpoint"] == "" and got["error_message"] == "" and got["input_tokens"] == 1000


@pytest.mark.parametrize("ts", [0.0, 1.5, 1764630000.0, 1764630000.123456, 1764630000.9999996, 1e9 + 5e-7])
def test_timestamps_are_stored_to_the_microsecond_as_datetime_rounds_them(key, ts):
    row = built_row(f"ts-{ts}", key)
    row["created_at"] = ts
    store.save_rows([row])
    assert stored(row["request_id"])["created_at"] == datetime.fromtimestamp(ts, UTC)


def test_a_request_id_already_stored_is_skipped(key):
    first = built_row("dup-1", key)
    store.save_rows([first])
    again = {**first, "status": "error", "input_tokens": 1}
    store.save_rows([again, built_row("dup-2", key), again])
    assert RequestLog.objects.count() == 2
    # one multi-row statement (a chunk of 4 on SQLite) with a duplicate inside it
    store.save_rows([built_row("dup-3", key), again, {**built_row("dup-3", key), "status": "error"}, first])
    assert RequestLog.objects.count() == 3 and stored("dup-3")["status"] == "success"
    got = stored("dup-1")
    assert got["status"] == "success" and got["input_tokens"] == 1000


def test_batches_of_every_size_are_stored_with_few_distinct_statements(key):
    """A batch is cut into full chunks and powers of two: every row lands once, and only a
    handful of statement texts are ever prepared (the driver caches each one it sees, and a
    multi-row INSERT's prepared form grows with its rows: one per size cost ~20 MB a worker)."""
    base = built_row("size", key)
    n = 0
    for size in (*range(1, 40), 127, 128, 129, 255, 300):
        batch = []
        for _ in range(size):
            n += 1
            batch.append({**base, "request_id": f"size-{n}"})
        store.save_rows(batch)
    assert RequestLog.objects.count() == n
    plan = store._plan()
    assert len(plan.multi) <= plan.chunk.bit_length()
    assert store.sizes(57, 128) == [32, 16, 8, 1] and store.sizes(300, 128) == [128, 128, 32, 8, 4]


def test_booleans_and_nulls_are_stored_as_before_on_sqlite(key):
    """The writer registers the driver's adapters for ``bool`` and ``None`` (one C call per
    value instead of a failed attribute lookup): SQLite still holds 0/1 integers and NULLs, and
    they read back as booleans and ``None``."""
    from django.db import connection

    if connection.vendor != "sqlite":
        pytest.skip("the adapters are the sqlite3 driver's")
    row = built_row("typed", key)
    row.update(stream=True, affinity=True, cost_nano=None, ttfb_ms=None)
    store.save_rows([row])
    with connection.cursor() as cur:
        cur.execute(
            "SELECT typeof(stream), stream, typeof(affinity), typeof(cost_estimated), cost_estimated,"
            " typeof(cost_nano), typeof(ttfb_ms) FROM requestlogs_requestlog WHERE request_id = %s",
            ["typed"],
        )
        assert cur.fetchone() == ("integer", 1, "integer", "integer", 0, "null", "null")
    got = stored("typed")
    assert got["stream"] is True and got["affinity"] is True and got["cost_estimated"] is False
    assert got["cost_nano"] is None and got["ttfb_ms"] is None
    # and Django's own queries with such parameters are unchanged
    assert RequestLog.objects.filter(stream=True, cost_nano=None, request_id="typed").count() == 1


def test_a_client_address_that_is_not_one_is_stored_as_none_without_failing_its_batch(key):
    """A row spooled by an older gateway can carry a proxy's ``unknown`` as its address; on
    PostgreSQL the inet column refused it and failed the batch (with Celery, the whole task)."""
    rows = [built_row("ip-good", key), built_row("ip-bad", key), built_row("ip-v6", key)]
    rows[1]["client_ip"] = "unknown"
    rows[2]["client_ip"] = "2001:db8::7"
    assert store.save_rows(rows) == 3
    assert stored("ip-good")["client_ip"] == "10.1.2.3"
    assert stored("ip-bad")["client_ip"] is None
    assert stored("ip-v6")["client_ip"] == "2001:db8::7"


def test_the_celery_task_stores_the_rest_of_a_batch_one_row_cannot_join(key, caplog):
    """A row that cannot be stored (here a timestamp that is no number) cost every row of the
    task; the task now falls back to row by row and names the dropped row."""
    from requestlogs.tasks import persist_request_logs

    rows = [built_row(f"task-{i}", key) for i in range(3)]
    rows[1]["created_at"] = "not a time"
    with caplog.at_level("ERROR", logger="requestlogs"):
        assert persist_request_logs(rows) == 2
    assert RequestLog.objects.filter(request_id__in=["task-0", "task-2"]).count() == 2
    assert not RequestLog.objects.filter(request_id="task-1").exists()
    assert "request_id=task-1" in caplog.text
