"""Hand-off of request-log rows from the proxy to the database (``gateway.handoff.HandOff``).

A record is a finished request's recorder (``requestlogs.recorder``), or a row dict; the writer
thread turns a recorder into the row's values (a tuple in ``rowfields.ROW_FIELDS`` order,
``prepare``; the Celery task and the spool get the row as a dict) and delivers each batch in one
go: with Redis, one Celery task (``requestlogs.tasks.persist_request_logs``, default queue) per
batch; without Redis, one transaction here (``requestlogs.store.save_rows``). Writes are idempotent by ``request_id``
(``ignore_conflicts``), so a batch delivered twice (a retry after an unclear failure, an adopted
spool claim) stores each row once. Through a Redis or database outage rows are spooled
to ``DATA_DIR/requestlog-spool`` (the hand-off's circuit, backoff, dead-letter to
``requestlog-spool/dead/``, pick-up at start and drain at shutdown, files 0600) and delivered when
it is back.

Knobs (``gateway_settings``): ``REQUEST_LOG_QUEUE_MAX``, ``REQUEST_LOG_SPOOL_MAX_MB``,
``REQUEST_LOG_RETRY_SECONDS``.
"""

from __future__ import annotations

import atexit
import logging
from collections import Counter
from typing import Any

import orjson
from django.conf import settings

from gateway.conf import gateway_settings
from gateway.handoff import HandOff
from requestlogs.rowfields import as_dict

log = logging.getLogger("requestlogs")

TASK_NAME = "requestlogs.tasks.persist_request_logs"
STATS: Counter[str] = Counter()  # submitted, persisted, published, spooled, retried, dropped


class Writer(HandOff):
    label = "request log"
    thread_name = "requestlog-writer"
    spool_name = "requestlog-spool"
    suffix = ".row"
    # Rows are small and many: gather a burst into one insert. A commit and the batch's set-up
    # (the owners query, the transaction, SQLite re-reading pages the other worker changed) are
    # paid per batch; at a few thousand rows a second a 0.05 s linger made batches of ~100,
    # where that share of each row's cost was still a third. A row shows up at most this much
    # later; a SIGKILL can lose up to ``queue_max`` + ``batch_max`` rows either way.
    batch_max = 1000
    resend_seconds = 2.0  # see HandOff.resend_seconds: stored ids are skipped on the way in
    linger_seconds = 0.25
    idle_release_seconds = 1.0
    queue_max = gateway_settings.REQUEST_LOG_QUEUE_MAX
    spool_max_bytes = int(gateway_settings.REQUEST_LOG_SPOOL_MAX_MB * 1024 * 1024)
    retry_seconds = gateway_settings.REQUEST_LOG_RETRY_SECONDS
    stats = STATS
    log = log

    def prepare(self, record: Any) -> Any:
        """The row of a finished request's recorder, as its values (built here, off the event
        loop: ``RequestLogRecorder.values``); a row dict (spooled, or submitted as one) as it is."""
        return record if type(record) is dict else record.values()

    def record_id(self, record: Any) -> str:
        if type(record) is not dict:
            return record.request_id()
        return str(record.get("request_id", ""))

    def payload_id(self, payload: Any) -> str:
        return str(as_dict(payload).get("request_id", ""))

    def encode_spool(self, payload: Any) -> bytes:
        return orjson.dumps(as_dict(payload))

    def decode_spool(self, data: bytes) -> dict[str, Any]:
        return orjson.loads(data)

    def deliver(self, rows: list[Any]) -> None:
        if settings.REDIS_URL:
            self.celery_app().send_task(TASK_NAME, args=[[as_dict(r) for r in rows]], retry=False)
            STATS["published"] += len(rows)
            return
        from django.db import close_old_connections, connection

        from requestlogs import store

        if connection.connection is not None:
            # Kept while batches keep coming: the hand-off gives it back after
            # ``idle_release_seconds`` idle. SQLite's CONN_MAX_AGE of 0 made every batch reopen
            # the file (a new connection registers Django's SQL functions and runs the
            # init PRAGMA: more CPU than inserting a batch of rows); a broken one is still closed.
            connection.close_at = None
        close_old_connections()
        try:
            self._relax_sqlite(connection)
            store.save_rows(rows)
        except Exception:
            connection.close()
            raise
        STATS["persisted"] += len(rows)

    _relaxed: Any = None  # the SQLite connection already switched to synchronous=NORMAL

    def _relax_sqlite(self, connection: Any) -> None:
        """This thread's SQLite connection commits without an fsync (``synchronous=NORMAL``, safe
        in WAL mode: a power cut may lose the last rows, never corrupt the file): request-log
        rows are a log, and the fsync per batch cost about a sixth of the writer's CPU. The
        setting is per connection; every other connection keeps SQLite's default."""
        if connection.vendor != "sqlite":
            return
        connection.ensure_connection()
        raw = connection.connection
        if raw is not self._relaxed:
            raw.execute("PRAGMA synchronous=NORMAL")
            self._relaxed = raw


writer = Writer()
atexit.register(writer.shutdown)


def submit(row: dict[str, Any]) -> None:
    """Never blocks, never raises."""
    try:
        writer.submit(row)
    except Exception:
        STATS["dropped"] += 1
        log.exception("request log dropped: submit failed")


def stats() -> dict[str, int]:
    return dict(STATS)
