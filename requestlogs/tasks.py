"""Celery tasks: persisting request-log rows handed off by a gateway process, and retention."""

from __future__ import annotations

import logging
from typing import Any

from celery import shared_task

from gateway.broker import db_outage_retry, save_or_split, wait_out_db_outage

log = logging.getLogger("requestlogs")


@shared_task(name="requestlogs.tasks.persist_request_logs", ignore_result=True, **db_outage_retry())
@wait_out_db_outage
def persist_request_logs(rows: list[dict[str, Any]]) -> int:
    """Insert a batch of rows (idempotent by request id); a row that cannot be stored costs only
    itself (``save_or_split``)."""
    from requestlogs import store

    return save_or_split(rows, store.save_rows, log=log, label="request log row", request_id=_request_id)


def _request_id(row: Any) -> str:
    return str(row.get("request_id", "") if isinstance(row, dict) else "")


@shared_task(name="requestlogs.tasks.enforce_retention", ignore_result=True)
def enforce_retention() -> int:
    from requestlogs import retention

    return retention.enforce()
