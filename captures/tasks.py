"""Celery tasks: persisting a capture handed off by a gateway process, and retention."""

from __future__ import annotations

import base64
import logging
from typing import Any

from celery import shared_task

from gateway.broker import db_outage_retry, save_or_split, wait_out_db_outage

log = logging.getLogger("captures")


@shared_task(name="captures.tasks.persist_capture", ignore_result=True, **db_outage_retry())
@wait_out_db_outage
def persist_capture(meta: dict[str, Any], blob_b64: str) -> int:
    """Insert one capture (``blob_b64``: base64 of the zlib-compressed dump), then keep the
    stored total within the size budget. Returns the new row's id."""
    from captures import retention, store

    cap = store.save(meta, base64.b64decode(blob_b64))
    try:
        retention.enforce_size()
    except Exception:  # the capture is stored; a budget pass failing must not lose it
        log.warning("capture size budget pass failed", exc_info=True)
    return cap.pk


@shared_task(name="captures.tasks.persist_captures", ignore_result=True, **db_outage_retry())
@wait_out_db_outage
def persist_captures(items: list[list[Any]]) -> int:
    """Insert a batch of captures (``[meta, blob_b64]`` each) in one transaction, then one size
    budget pass: what the gateway publishes since issue 13's drain work. One task per capture
    (``persist_capture``, kept for messages an older gateway queued) cost the worker a task and
    a budget query per row, and a spooled backlog took tens of seconds to write. A capture that
    cannot be stored costs only itself (``save_or_split``)."""
    from captures import retention

    saved = save_or_split(items, _save_many, log=log, label="capture", request_id=_request_id)
    try:
        retention.enforce_size()
    except Exception:  # the captures are stored; a budget pass failing must not lose them
        log.warning("capture size budget pass failed", exc_info=True)
    return saved


def _save_many(items: list[list[Any]]) -> int:
    from django.db import transaction

    from captures import store

    with transaction.atomic():
        return store.save_many([(meta, base64.b64decode(blob)) for meta, blob in items])


def _request_id(item: list[Any]) -> str:
    meta = item[0] if item else None
    return str(meta.get("request_id", "")) if isinstance(meta, dict) else ""


@shared_task(name="captures.tasks.enforce_retention", ignore_result=True)
def enforce_retention() -> dict[str, int]:
    from captures import retention

    result = retention.enforce()
    return {"by_age": result.by_age, "by_size": result.by_size}
