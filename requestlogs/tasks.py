"""Celery tasks: persisting request-log rows handed off by a gateway process, and retention."""

from __future__ import annotations

from typing import Any

from celery import shared_task

from gateway.broker import db_outage_retry, wait_out_db_outage


@shared_task(name="requestlogs.tasks.persist_request_logs", ignore_result=True, **db_outage_retry())
@wait_out_db_outage
def persist_request_logs(rows: list[dict[str, Any]]) -> int:
    """Insert a batch of rows (idempotent by request id)."""
    from requestlogs import store

    return store.save_rows(rows)


@shared_task(name="requestlogs.tasks.enforce_retention", ignore_result=True)
def enforce_retention() -> int:
    from requestlogs import retention

    return retention.enforce()
