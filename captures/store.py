"""Writing capture rows: shared by the Celery task and the in-process writer."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from captures.models import Capture

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
        logical_model=meta.get("logical_model") or "",
        status=min(int(meta.get("status") or 0), 32767),
        is_error=bool(meta.get("is_error")),
        attempt_count=min(int(meta.get("attempt_count") or 0), 32767),
        truncated=bool(meta.get("truncated")),
        raw_bytes=int(meta.get("raw_bytes") or 0),
        size_bytes=len(blob),
        payload=blob,
    )


def save_many(rows: list[tuple[dict[str, Any], bytes]]) -> list[Capture]:
    """Insert a batch of captures with one owner lookup and one multi-row INSERT (``bulk_create``;
    the caller holds the transaction). On SQLite and PostgreSQL the rows come back with their ids."""
    owners = _owners(int(key) for meta, _ in rows if (key := meta.get("api_key_id")) is not None)
    return Capture.objects.bulk_create([_row(meta, blob, owners) for meta, blob in rows], batch_size=500)


def save(meta: dict[str, Any], blob: bytes) -> Capture:
    """Insert one capture (the Celery task)."""
    return save_many([(meta, blob)])[0]
