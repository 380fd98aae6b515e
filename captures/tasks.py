"""Celery tasks: persisting a capture handed off by a gateway process, and retention."""

from __future__ import annotations

import base64
import logging
from typing import Any

from celery import shared_task

from gateway.broker import db_outage_retry, wait_out_db_outage

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


@shared_task(name="captures.tasks.enforce_retention", ignore_result=True)
def enforce_retention() -> dict[str, int]:
    from captures import retention

    result = retention.enforce()
    return {"by_age": result.by_age, "by_size": result.by_size}
