"""Celery tasks: persisting request-log rows handed off by a gateway process, and retention."""

from __future__ import annotations

import logging
from typing import Any

from celery import shared_task

from gateway.broker import db_outage_retry, wait_out_db_outage

log = logging.getLogger("requestlogs")


@shared_task(name="requestlogs.tasks.persist_request_logs", ignore_result=True, **db_outage_retry())
@wait_out_db_outage
def persist_request_logs(rows: list[dict[str, Any]]) -> int:
    """Insert a batch of rows (idempotent by request id). A batch that fails for a reason of its
    own (not the database being away: that is retried) is written row by row, so one row that
    cannot be stored costs only itself (logged with its request id), not every row of the task."""
    from django.db import InterfaceError, OperationalError

    from requestlogs import store

    try:
        return store.save_rows(rows)
    except (OperationalError, InterfaceError):
        raise
    except Exception:
        if len(rows) == 1:
            log.exception("request log row dropped: request_id=%s", _request_id(rows[0]))
            return 0
        log.warning("request log batch of %d failed; storing it row by row", len(rows), exc_info=True)
    saved = 0
    for row in rows:
        try:
            saved += store.save_rows([row])
        except (OperationalError, InterfaceError):
            raise  # retried as a whole: the rows stored meanwhile are skipped then
        except Exception:
            log.exception("request log row dropped: request_id=%s", _request_id(row))
    return saved


def _request_id(row: Any) -> str:
    return str(row.get("request_id", "") if isinstance(row, dict) else "")


@shared_task(name="requestlogs.tasks.enforce_retention", ignore_result=True)
def enforce_retention() -> int:
    from requestlogs import retention

    return retention.enforce()
