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

from django.db import connection, models, transaction

from requestlogs.models import RequestLog

_COLUMNS = [f for f in RequestLog._meta.concrete_fields if not f.primary_key]


def _adapter(field: models.Field) -> Callable[[Any], Any]:
    ops = connection.ops
    if isinstance(field, models.JSONField):
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
    plan = []
    for f in _COLUMNS:
        default = f.get_default() if f.has_default() else None
        plan.append((f.attname, _adapter(f), default))
    values = []
    for r in rows:
        r = {**r, "owner_id": owners.get(r.get("api_key_id"))}
        values.append(
            tuple(
                adapt(r[name])
                if r.get(name) is not None
                else (adapt(default) if default is not None else None)
                for name, adapt, default in plan
            )
        )
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.executemany(_insert_sql(), values)
    return len(rows)
