"""Writing request-log rows: shared by the Celery task and the in-process writer.

One ``INSERT ... ON CONFLICT (request_id) DO NOTHING`` with ``executemany`` per batch, in one
transaction: idempotent by request id (a batch delivered twice stores each row once), and several
times cheaper in CPU than ``bulk_create`` (which builds a model instance and runs every field's
``get_db_prep_save`` per row). Without Redis this runs in the gateway process, so its CPU is the
event loop's too. Values are adapted with the backend's own ``connection.ops`` helpers, so the
same code writes SQLite and PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import orjson
from django.db import connection, models, transaction

from requestlogs.models import RequestLog

_COLUMNS = [f for f in RequestLog._meta.concrete_fields if not f.primary_key]


def _sqlite_json(value: Any) -> Any:
    """JSON text for SQLite with orjson (several times cheaper than ``json.dumps``; the same
    value read back), falling back to the backend's own adapter for what orjson refuses."""
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        return connection.ops.adapt_json_value(value, None)


def _adapter(field: models.Field) -> Callable[[Any], Any]:
    ops = connection.ops
    if isinstance(field, models.JSONField):
        if connection.vendor == "sqlite":
            return _sqlite_json
        return lambda v: ops.adapt_json_value(v, None)
    if isinstance(field, models.DateTimeField):
        return lambda v: ops.adapt_datetimefield_value(datetime.fromtimestamp(float(v), UTC))
    if isinstance(field, models.GenericIPAddressField):
        return lambda v: ops.adapt_ipaddressfield_value(v or None)
    return lambda v: v


def _insert_sql() -> str:
    qn = connection.ops.quote_name
    cols = ", ".join(qn(f.column) for f in _COLUMNS)
    marks = ", ".join(["%s"] * len(_COLUMNS))
    return (
        f"INSERT INTO {qn(RequestLog._meta.db_table)} ({cols}) VALUES ({marks}) "
        f"ON CONFLICT ({qn('request_id')}) DO NOTHING"
    )


def save_rows(rows: list[dict[str, Any]]) -> int:
    """Insert the rows in one transaction, skipping request ids already stored (idempotent).
    The owner is copied from each key now, so a later change of owner does not move old rows;
    a key deleted meanwhile keeps its id and copied name. Returns how many rows were given."""
    from keys.models import ApiKey

    key_ids = {r.get("api_key_id") for r in rows if r.get("api_key_id") is not None}
    owners = dict(ApiKey.objects.filter(pk__in=key_ids).values_list("pk", "owner_id")) if key_ids else {}
    sql, plan = _plan()
    values = []
    for r in rows:
        owner = owners.get(r.get("api_key_id"))
        values.append(
            tuple(
                owner
                if name == "owner_id"
                else adapt(value)
                if (value := r.get(name)) is not None
                else default
                for name, adapt, default in plan
            )
        )
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.executemany(sql, values)
    return len(rows)


_plans: dict[str, tuple[str, list[tuple[str, Callable[[Any], Any], Any]]]] = {}


def _plan() -> tuple[str, list[tuple[str, Callable[[Any], Any], Any]]]:
    """The INSERT statement and, per column, (row key, adapter, adapted default), built once per
    database vendor: rebuilding them per batch cost as much as a small batch's insert."""
    vendor = connection.vendor
    found = _plans.get(vendor)
    if found is None:
        plan = []
        for f in _COLUMNS:
            adapt = _adapter(f)
            default = f.get_default() if f.has_default() else None
            plan.append((f.attname, adapt, adapt(default) if default is not None else None))
        found = _plans[vendor] = (_insert_sql(), plan)
    return found
