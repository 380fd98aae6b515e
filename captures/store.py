"""Writing capture rows: shared by the Celery task and the in-process writer.

A batch is one prepared ``INSERT`` with ``executemany`` (``save_many``), as request logs do; a
single capture (``save``) still goes through the ORM. There is no unique constraint on
``request_id`` (the table predates it); ``save_many`` skips ids already stored instead, so a batch
delivered twice (a crash between commit and spool removal, the hand-off's resend of what was
published just before a broker outage) stores each capture once. Two copies of one capture
written at the same instant by two Celery processes could still both land."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from django.db import connection

from captures.models import Capture
from gateway.dbtext import storable

log = logging.getLogger("captures")


def _owners(key_ids: Iterable[int]) -> dict[int, int | None]:
    """Key id -> its owner's id, in one query for a batch (a key deleted meanwhile is absent)."""
    from keys.models import ApiKey

    ids = {k for k in key_ids if k is not None}
    if not ids:
        return {}
    return dict(ApiKey.objects.filter(pk__in=ids).values_list("pk", "owner_id"))


def _row(meta: dict[str, Any], blob: bytes, owners: dict[int, int | None]) -> Capture:
    """One unsaved row from its metadata (``DumpMeta.as_dict()``) and compressed dump. The owner
    id is copied from the key now, so a later change of owner does not move old captures."""
    key_id = meta.get("api_key_id")
    if key_id is not None and key_id not in owners:
        key_id = None  # the key was deleted meanwhile: keep the capture, with the copied name
    return Capture(
        request_id=meta["request_id"],
        client_request_id=(meta.get("client_request_id") or "")[:256],
        created_at=datetime.fromtimestamp(meta["created_at"], UTC),
        api_key_id=key_id,
        api_key_name=meta.get("api_key_name") or "",
        owner_id=owners.get(key_id) if key_id is not None else None,
        client_protocol=meta.get("client_protocol") or "",
        stream=bool(meta.get("stream")),
        logical_model=storable(meta.get("logical_model") or ""),
        status=min(int(meta.get("status") or 0), 32767),
        is_error=bool(meta.get("is_error")),
        attempt_count=min(int(meta.get("attempt_count") or 0), 32767),
        truncated=bool(meta.get("truncated")),
        raw_bytes=int(meta.get("raw_bytes") or 0),
        size_bytes=len(blob),
        payload=blob,
    )


_COLUMNS = (
    "request_id",
    "client_request_id",
    "created_at",
    "api_key_id",
    "api_key_name",
    "owner_id",
    "client_protocol",
    "stream",
    "logical_model",
    "status",
    "is_error",
    "attempt_count",
    "truncated",
    "raw_bytes",
    "size_bytes",
    "payload",
)
_sql: dict[str, str] = {}  # vendor -> the INSERT statement (built once)


def _insert_sql() -> str:
    found = _sql.get(connection.vendor)
    if found is None:
        qn = connection.ops.quote_name
        cols = ", ".join(qn(Capture._meta.get_field(name).column) for name in _COLUMNS)
        marks = ", ".join(["%s"] * len(_COLUMNS))
        found = _sql[connection.vendor] = (
            f"INSERT INTO {qn(Capture._meta.db_table)} ({cols}) VALUES ({marks})"
        )
    return found


def _values(meta: dict[str, Any], blob: bytes, owners: dict[int, int | None]) -> tuple[Any, ...]:
    """One row's column values in ``_COLUMNS`` order: what ``_row`` would store, adapted with the
    backend's own helpers (the timestamp; ``bytes`` is what both drivers take for the payload)."""
    key_id = meta.get("api_key_id")
    if key_id is not None and key_id not in owners:
        key_id = None  # the key was deleted meanwhile: keep the capture, with the copied name
    created = datetime.fromtimestamp(meta["created_at"], UTC)
    return (
        meta["request_id"],
        (meta.get("client_request_id") or "")[:256],
        connection.ops.adapt_datetimefield_value(created),
        key_id,
        meta.get("api_key_name") or "",
        owners.get(key_id) if key_id is not None else None,
        meta.get("client_protocol") or "",
        bool(meta.get("stream")),
        storable(meta.get("logical_model") or ""),
        min(int(meta.get("status") or 0), 32767),
        bool(meta.get("is_error")),
        min(int(meta.get("attempt_count") or 0), 32767),
        bool(meta.get("truncated")),
        int(meta.get("raw_bytes") or 0),
        len(blob),
        bytes(blob),
    )


def save_many(rows: list[tuple[dict[str, Any], bytes]]) -> int:
    """Insert a batch of captures with one owner lookup and one prepared INSERT run with
    ``executemany`` (the caller holds the transaction); returns how many. The same rows as
    ``bulk_create`` of ``_row`` (tested), without a model instance and every field's
    ``get_db_prep_save`` per row: those were about two thirds of the in-process writer's
    ``deliver`` CPU per capture (issue 20)."""
    rows = _unstored(rows)
    if not rows:
        return 0
    owners = _owners(int(key) for meta, _ in rows if (key := meta.get("api_key_id")) is not None)
    values = [_values(meta, blob, owners) for meta, blob in rows]
    with connection.cursor() as cursor:
        cursor.executemany(_insert_sql(), values)
    return len(values)


def _unstored(rows: list[tuple[dict[str, Any], bytes]]) -> list[tuple[dict[str, Any], bytes]]:
    """The rows whose request id is neither stored yet nor earlier in the batch (one indexed
    lookup per batch)."""
    ids = {meta["request_id"] for meta, _ in rows}
    seen = (
        set(Capture.objects.filter(request_id__in=ids).values_list("request_id", flat=True)) if ids else set()
    )
    fresh = []
    for meta, blob in rows:
        if meta["request_id"] not in seen:
            seen.add(meta["request_id"])
            fresh.append((meta, blob))
    return fresh


def save(meta: dict[str, Any], blob: bytes) -> Capture:
    """Insert one capture and return it with its id (the per-capture Celery task older gateways
    queued, and tests): the ORM path, one row."""
    owners = _owners([meta["api_key_id"]] if meta.get("api_key_id") is not None else [])
    row = _row(meta, blob, owners)
    row.save(force_insert=True)
    return row
