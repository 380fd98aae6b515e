"""Hand-off point from the proxy to capture persistence (the machinery is
``gateway.handoff.HandOff``, shared with request logs: fail-fast publish, the outage circuit,
batch spooling, backoff and dead-letter, pick-up at start, drain to the spool at shutdown).

``submit`` runs on the proxy's event loop after the client's response is finished; the writer
thread then, per batch:

1. builds the bounded, masked dump and compresses it (``captures.dump``);
2. with ``settings.REDIS_URL``: publishes ``captures.tasks.persist_captures`` (a batch of meta + base64 blob)
   to the ``captures`` queue, for a Celery worker to insert; without Redis: inserts the rows
   here (``captures.store``, one transaction) and applies the size budget;
3. when that fails the blob is spooled to ``DATA_DIR/capture-spool`` (mode 0600) and retried; a
   capture that keeps failing for its own sake is moved to ``capture-spool/dead/``
   (``manage.py capturespool`` lists, requeues or purges them).

What can still be lost is bounded and counted: a SIGKILL loses at most the queue
(``CAPTURE_QUEUE_MAX`` records) plus the batch in flight (``BATCH_MAX``).

Under overload the writer sheds (issue 20): while the worker's event loop is busy and the writer
behind, the writer thread keeps to ``CAPTURE_WRITER_SHARE`` of a core (``HandOff._yield``), the queue fills, and
``capture_recorder`` then records nothing for a new request (it is counted as dropped), so a
shed capture costs the request path one length check. One log line a second says how many.

Knobs (``gateway_settings``): ``CAPTURE_QUEUE_MAX`` (1000 records), ``CAPTURE_WRITER_SHARE`` (0.1), ``CAPTURE_SPOOL_MAX_MB``
(256), ``CAPTURE_RETRY_SECONDS`` (2), ``CAPTURE_BROKER_TIMEOUT`` (1),
``CAPTURE_BROKER_COOLDOWN_SECONDS`` (5), ``CAPTURE_DEAD_LETTER_AFTER`` (6),
``CAPTURE_FLUSH_SECONDS`` (10, the shutdown drain).
"""

from __future__ import annotations

import atexit
import base64
import logging
import time
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
from django.conf import settings

from captures.record import CaptureRecord
from gateway.broker import DeliveryPaused, configure_fail_fast, is_outage
from gateway.conf import gateway_settings
from gateway.handoff import CLAIM_TTL, HandOff

log = logging.getLogger("captures")

QUEUE_MAX = gateway_settings.CAPTURE_QUEUE_MAX
SPOOL_MAX_BYTES = int(gateway_settings.CAPTURE_SPOOL_MAX_MB * 1024 * 1024)
RETRY_SECONDS = gateway_settings.CAPTURE_RETRY_SECONDS
BATCH_MAX = 64  # captures written in one database transaction by the in-process writer
TASK_NAME = "captures.tasks.persist_captures"  # a batch per task
# Compressed capture bytes per published task, at most (a single larger capture goes alone):
# a batch of 64 large captures must not become one message of hundreds of MiB.
TASK_MAX_BYTES = 4 * 1024 * 1024
TASK_QUEUE = "captures"

# submitted, persisted, published, spooled, retried, dropped, dead_lettered, outages,
# spooled_at_shutdown, lost_in_flight
STATS: Counter[str] = Counter()
__all__ = [
    "CLAIM_TTL",
    "STATS",
    "DeliveryPaused",
    "Writer",
    "configure_fail_fast",
    "dead_dir",
    "is_outage",
    "spool_dir",
    "stats",
    "submit",
    "writer",
]


def spool_dir() -> Path:
    return Path(settings.DATA_DIR) / "capture-spool"


def dead_dir() -> Path:
    return spool_dir() / "dead"


class Writer(HandOff):
    """The per-process capture writer thread and its spool. A payload is ``(meta, blob)``."""

    label = "capture"
    thread_name = "capture-writer"
    spool_name = "capture-spool"
    suffix = ".cap"
    batch_max = BATCH_MAX
    resend_seconds = 2.0  # see HandOff.resend_seconds: stored ids are skipped on the way in
    queue_max = QUEUE_MAX
    spool_max_bytes = SPOOL_MAX_BYTES
    retry_seconds = RETRY_SECONDS
    busy_share = min(1.0, max(0.01, float(gateway_settings.CAPTURE_WRITER_SHARE)))
    # One transaction per burst, not per capture, and the connection kept while captures flow:
    # at one connection the writer used to open a database connection for every capture.
    linger_seconds = 0.05
    idle_release_seconds = 1.0
    stats = STATS
    log = log

    def __init__(self) -> None:
        super().__init__()
        self._budget_at = 0.0  # when the size budget last ran (at most once a second)

    def prepare(self, record: CaptureRecord) -> tuple[dict[str, Any], bytes]:
        from captures.dump import build, compress

        data, meta = build(record)
        return meta.as_dict(), compress(data)

    def payload_id(self, payload: tuple[dict[str, Any], bytes]) -> str:
        return str(payload[0].get("request_id", ""))

    def encode_spool(self, payload: tuple[dict[str, Any], bytes]) -> bytes:
        meta, blob = payload
        return orjson.dumps(meta) + b"\n" + blob

    def decode_spool(self, data: bytes) -> tuple[dict[str, Any], bytes]:
        head, _, blob = data.partition(b"\n")
        meta = orjson.loads(head)
        if not isinstance(meta, dict):
            raise ValueError("spool file head is not an object")
        return meta, blob

    def deliver(self, rows: list[tuple[dict[str, Any], bytes]]) -> None:
        """Publish the (meta, blob) rows to Celery (with Redis), a batch of up to
        ``TASK_MAX_BYTES`` per task, or write them here; raises on failure. Published rows are
        removed from ``rows`` as they go (with Redis, the tasks before the failing one are
        already published), so only the rest is spooled."""
        if settings.REDIS_URL:
            app = self.celery_app()
            while rows:
                n, size = 0, 0
                while n < len(rows) and (n == 0 or size + len(rows[n][1]) <= TASK_MAX_BYTES):
                    size += len(rows[n][1])
                    n += 1
                items = [[meta, base64.b64encode(blob).decode()] for meta, blob in rows[:n]]
                app.send_task(TASK_NAME, args=[items], queue=TASK_QUEUE, retry=False)
                del rows[:n]
                STATS["published"] += n
            return
        self._save_rows(rows)

    def _save_rows(self, rows: list[tuple[dict[str, Any], bytes]]) -> None:
        """Insert rows in one transaction with one multi-row INSERT (one commit and one statement,
        not one per capture: those were most of an insert's cost), then the size budget at most
        once a second."""
        from django.db import close_old_connections, connection, transaction

        from captures import retention, store

        if connection.connection is not None:
            # Kept while batches keep coming (the hand-off gives it back after
            # ``idle_release_seconds`` idle), as the request-log writer does: SQLite's
            # CONN_MAX_AGE of 0 made every batch reopen the file, register Django's SQL
            # functions and run the init PRAGMA, about a fifth of ``deliver``. A broken
            # connection is still closed.
            connection.close_at = None
        close_old_connections()
        try:
            with transaction.atomic():
                store.save_many(rows)
        except Exception:
            connection.close()
            raise
        STATS["persisted"] += len(rows)
        now = time.monotonic()
        if now - self._budget_at < 1.0:
            return  # a second's worth of captures cannot overrun the budget by much
        self._budget_at = now
        try:
            retention.enforce_size()
        except Exception:
            log.warning("capture size budget pass failed", exc_info=True)


writer = Writer()
atexit.register(writer.shutdown)


def shutdown(timeout: float | None = None) -> None:
    """The gateway's lifespan shutdown hook (registered by ``gateway.wiring``)."""
    if timeout is None:
        timeout = float(gateway_settings.CAPTURE_FLUSH_SECONDS)
    writer.shutdown(timeout)


def submit(record: CaptureRecord) -> None:
    """Never blocks, never raises: persisting a capture must not touch the client's response."""
    try:
        writer.submit(record)
    except Exception:
        STATS["dropped"] += 1
        log.exception("capture dropped: submit failed")


def stats() -> dict[str, int]:
    return dict(STATS)
