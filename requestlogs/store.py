"""Writing request-log rows: shared by the Celery task and the in-process writer."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django.db import transaction

from requestlogs.models import RequestLog

_FIELDS = {f.attname for f in RequestLog._meta.concrete_fields} - {"id", "created_at", "owner_id"}


def save_rows(rows: list[dict[str, Any]]) -> int:
    """Insert the rows in one transaction, skipping request ids already stored (idempotent).
    The owner is copied from each key now, so a later change of owner does not move old rows;
    a key deleted meanwhile keeps its id and copied name. Returns how many rows were given."""
    from keys.models import ApiKey

    key_ids = {r.get("api_key_id") for r in rows if r.get("api_key_id") is not None}
    owners = dict(ApiKey.objects.filter(pk__in=key_ids).values_list("pk", "owner_id")) if key_ids else {}
    objs = []
    for r in rows:
        values = {k: v for k, v in r.items() if k in _FIELDS}
        values["created_at"] = datetime.fromtimestamp(float(r["created_at"]), UTC)
        values["owner_id"] = owners.get(r.get("api_key_id"))
        objs.append(RequestLog(**values))
    with transaction.atomic():
        RequestLog.objects.bulk_create(objs, ignore_conflicts=True)
    return len(objs)
