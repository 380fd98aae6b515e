"""Hand-off point from the proxy to capture persistence (the machinery is
``gateway.handoff.HandOff``, shared with request logs).

``submit`` runs on the proxy's event loop after the client's response is finished; the writer
thread then, per batch:

1. builds the bounded, masked dump and compresses it (``captures.dump``);
2. with ``settings.REDIS_URL``: publishes ``captures.tasks.persist_capture`` (meta + base64 blob)
   to the ``captures`` queue, for a Celery worker to insert; without Redis: inserts the rows
   here (``captures.store``, one transaction) and applies the size budget;
3. when that fails the blob is spooled to ``DATA_DIR/capture-spool`` and retried.

Knobs (``gateway_settings``): ``CAPTURE_QUEUE_MAX`` (1000 records), ``CAPTURE_SPOOL_MAX_MB``
(256), ``CAPTURE_RETRY_SECONDS`` (2).
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
from gateway.conf import gateway_settings
from gateway.handoff import CLAIM_TTL, HandOff

log = logging.getLogger("captures")

QUEUE_MAX = gateway_settings.CAPTURE_QUEUE_MAX
SPOOL_MAX_BYTES = int(gateway_settings.CAPTURE_SPOOL_MAX_MB * 1024 * 1024)
RETRY_SECONDS = gateway_settings.CAPTURE_RETRY_SECONDS
BATCH_MAX = 64  # captures written in one database transaction by the in-process writer
TASK_NAME = "captures.tasks.persist_capture"
TASK_QUEUE = "captures"

STATS: Counter[str] = Counter()  # submitted, persisted, published, spooled, retried, dropped
__all__ = ["CLAIM_TTL", "STATS", "Writer", "stats", "submit", "writer"]


def spool_dir() -> Path:
    return Path(settings.DATA_DIR) / "capture-spool"


class Writer(HandOff):
    """The per-process capture writer thread and its spool. A payload is ``(meta, blob)``."""

    label = "capture"
    thread_name = "capture-writer"
    spool_name = "capture-spool"
    suffix = ".cap"
    batch_max = BATCH_MAX
    queue_max = QUEUE_MAX
    spool_max_bytes = SPOOL_MAX_BYTES
    retry_seconds = RETRY_SECONDS
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
        return orjson.loads(head), blob

    def deliver(self, rows: list[tuple[dict[str, Any], bytes]]) -> None:
        """Publish each (meta, blob) to Celery (with Redis) or write the rows here; raises on
        failure (with Redis, rows before the failing one may already be published)."""
        if settings.REDIS_URL:
            app = self.celery_app()
            for meta, blob in rows:
                app.send_task(
                    TASK_NAME, args=[meta, base64.b64encode(blob).decode()], queue=TASK_QUEUE, retry=False
                )
                STATS["published"] += 1
            return
        self._save_rows(rows)

    def _save_rows(self, rows: list[tuple[dict[str, Any], bytes]]) -> None:
        """Insert rows in one transaction (one commit, not one per capture: the commit is most
        of an insert's cost), then the size budget at most once a second."""
        from django.db import close_old_connections, connection, transaction

        from captures import retention, store

        close_old_connections()
        try:
            with transaction.atomic():
                for meta, blob in rows:
                    store.save(meta, blob)
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
atexit.register(writer.flush, 5.0)


def submit(record: CaptureRecord) -> None:
    """Never blocks, never raises: persisting a capture must not touch the client's response."""
    try:
        writer.submit(record)
    except Exception:
        STATS["dropped"] += 1
        log.exception("capture dropped: submit failed")


def stats() -> dict[str, int]:
    return dict(STATS)
