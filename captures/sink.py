"""Hand-off point from the proxy to capture persistence.

``submit`` runs on the proxy's event loop after the client's response is finished. It only puts
the record on a bounded ``queue.Queue``; one daemon writer thread per process drains it:

1. build the bounded, masked dump and compress it (``captures.dump``);
2. with ``settings.REDIS_URL``: publish ``captures.tasks.persist_capture`` (meta + base64 blob)
   to the ``captures`` queue, for a Celery worker to insert; without Redis: insert the row
   here (``captures.store``) and apply the size budget;
3. when that fails (Redis unreachable, database locked) the blob is spooled to
   ``DATA_DIR/capture-spool`` (temp file + rename) and retried every few seconds, oldest first.
   Several processes may share the spool: a file is claimed by renaming it before delivery.

Nothing here can delay or change the client's response. Every drop (queue full, spool full or
unwritable, a record that cannot be serialized) is counted in :data:`STATS` and logged.

Knobs (environment): ``GATEWAY_CAPTURE_QUEUE_MAX`` (1000 records), ``GATEWAY_CAPTURE_SPOOL_MAX_MB``
(256), ``GATEWAY_CAPTURE_RETRY_SECONDS`` (2).
"""

from __future__ import annotations

import atexit
import base64
import logging
import os
import queue
import re
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
from django.conf import settings

from captures.record import CaptureRecord
from gateway.conf import gateway_settings

log = logging.getLogger("captures")

QUEUE_MAX = gateway_settings.CAPTURE_QUEUE_MAX
SPOOL_MAX_BYTES = int(gateway_settings.CAPTURE_SPOOL_MAX_MB * 1024 * 1024)
RETRY_SECONDS = gateway_settings.CAPTURE_RETRY_SECONDS
CLAIM_TTL = 300.0  # seconds before another process's unfinished claim is taken back
BATCH_MAX = 64  # captures written in one database transaction by the in-process writer
TASK_NAME = "captures.tasks.persist_capture"
TASK_QUEUE = "captures"

STATS: Counter[str] = Counter()  # submitted, persisted, published, spooled, retried, dropped
_SAFE = re.compile(r"[^A-Za-z0-9_-]")


def spool_dir() -> Path:
    return Path(settings.DATA_DIR) / "capture-spool"


class Writer:
    """The per-process writer thread and its spool."""

    def __init__(self) -> None:
        self.queue: queue.Queue[CaptureRecord] = queue.Queue(maxsize=QUEUE_MAX)
        self.thread: threading.Thread | None = None
        self.lock = threading.Lock()
        self.busy = False
        self._celery = None
        # What the spool held when last looked at: (directory, pending, when). Listing the
        # directory for every record cost more than writing the record.
        self._spool_seen: tuple[Path, bool, float] | None = None
        self._budget_at = 0.0  # when the size budget last ran (at most once a second)

    # -- request path -------------------------------------------------------------------------
    def submit(self, record: CaptureRecord) -> None:
        if self.thread is None or not self.thread.is_alive():
            self._start()
        try:
            self.queue.put_nowait(record)
            STATS["submitted"] += 1
        except queue.Full:
            STATS["dropped"] += 1
            log.warning("capture dropped: writer queue full (%d records); request_id=%s",
                        QUEUE_MAX, record.request_id)

    def _start(self) -> None:
        with self.lock:
            if self.thread is not None and self.thread.is_alive():
                return
            self.thread = threading.Thread(target=self._run, name="capture-writer", daemon=True)
            self.thread.start()

    # -- writer thread ------------------------------------------------------------------------
    def _run(self) -> None:
        next_retry = time.monotonic()
        while True:
            timeout = max(0.05, next_retry - time.monotonic()) if self._spool_pending() else None
            try:
                batch = [self.queue.get(timeout=timeout)]
            except queue.Empty:
                batch = []
            while batch and len(batch) < BATCH_MAX:  # whatever else is waiting goes in one write
                try:
                    batch.append(self.queue.get_nowait())
                except queue.Empty:
                    break
            if batch:
                self.busy = True
                try:
                    self._handle(batch)
                finally:
                    if self.queue.empty():
                        self._release_db()
                    self.busy = False
                    for _ in batch:
                        self.queue.task_done()
            if time.monotonic() >= next_retry and self._spool_pending():
                self.busy = True
                try:
                    self.retry_spool()
                finally:
                    self._release_db()
                    self.busy = False
                next_retry = time.monotonic() + RETRY_SECONDS

    @staticmethod
    def _release_db() -> None:
        """Idle: give the database connection back (a writer thread must not pin one, and a
        test database cannot be dropped while it is open)."""
        if settings.REDIS_URL:
            return
        try:
            from django.db import connection

            connection.close()
        except Exception:
            pass

    def _handle(self, records: list[CaptureRecord]) -> None:
        from captures.dump import build, compress

        built: list[tuple[dict[str, Any], bytes]] = []
        for record in records:
            try:
                data, meta = build(record)
                built.append((meta.as_dict(), compress(data)))
            except Exception:
                STATS["dropped"] += 1
                log.exception("capture dropped: could not build request_id=%s", record.request_id)
        if not built:
            return
        if self._spool_pending():
            # Keep the order: older spooled captures go first, these wait behind them.
            self.retry_spool()
            if self._spool_pending():
                for meta, blob in built:
                    self._spool(meta, blob)
                return
        if len(built) > 1:
            try:
                self.deliver(built)
                return
            except Exception as exc:  # one bad row must not cost the others: go one by one
                log.warning("capture batch delivery failed (%r); delivering one by one", exc)
        for row in built:
            try:
                self.deliver([row])
            except Exception as exc:
                log.warning("capture delivery failed, spooling request_id=%s: %r", row[0].get("request_id"), exc)
                self._spool(*row)

    def deliver(self, rows: list[tuple[dict[str, Any], bytes]]) -> None:
        """Publish each (meta, blob) to Celery (with Redis) or write the rows here; raises on
        failure (with Redis, rows before the failing one may already be published)."""
        if settings.REDIS_URL:
            app = self._celery_app()
            for meta, blob in rows:
                app.send_task(TASK_NAME, args=[meta, base64.b64encode(blob).decode()], queue=TASK_QUEUE,
                              retry=False)
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

    def _celery_app(self):
        if self._celery is None:
            from gateway.celery import app

            # Fail fast instead of hanging the writer on a broker that does not answer.
            opts = dict(app.conf.broker_transport_options or {})
            opts.setdefault("socket_connect_timeout", 3)
            opts.setdefault("socket_timeout", 10)
            app.conf.broker_transport_options = opts
            self._celery = app
        return self._celery

    # -- spool --------------------------------------------------------------------------------
    def _spool_pending(self) -> bool:
        """Whether spooled captures wait. Our own spooling and retries are seen at once; files
        another process spooled are noticed within ``RETRY_SECONDS``."""
        d = spool_dir()
        now = time.monotonic()
        seen = self._spool_seen
        if seen is not None and seen[0] == d and now - seen[2] < RETRY_SECONDS:
            return seen[1]
        try:
            pending = any(p.suffix == ".cap" for p in d.iterdir())
        except FileNotFoundError:
            pending = False
        self._spool_seen = (d, pending, now)
        return pending

    def _spool_changed(self) -> None:
        self._spool_seen = None

    def _spool(self, meta: dict[str, Any], blob: bytes) -> None:
        d = spool_dir()
        try:
            d.mkdir(parents=True, exist_ok=True)
            used = sum(p.stat().st_size for p in d.iterdir() if p.is_file())
            data = orjson.dumps(meta) + b"\n" + blob
            if used + len(data) > SPOOL_MAX_BYTES:
                STATS["dropped"] += 1
                log.error("capture dropped: spool full (%d bytes); request_id=%s", used, meta.get("request_id"))
                return
            name = f"{time.time_ns():020d}-{os.getpid()}-{_SAFE.sub('_', str(meta.get('request_id', ''))[:40])}"
            tmp = d / (name + ".tmp")
            tmp.write_bytes(data)
            tmp.rename(d / (name + ".cap"))
            self._spool_changed()
            STATS["spooled"] += 1
        except OSError:
            STATS["dropped"] += 1
            log.exception("capture dropped: spool not writable; request_id=%s", meta.get("request_id"))

    def retry_spool(self) -> int:
        """Deliver spooled captures oldest first; stop at the first failure. Returns how many
        were delivered."""
        d = spool_dir()
        self._spool_changed()
        try:
            self._adopt_orphans(d)
            files = sorted(p for p in d.iterdir() if p.suffix == ".cap")
        except FileNotFoundError:
            return 0
        done = 0
        for path in files:
            claimed = path.with_suffix(f".claim{os.getpid()}")
            try:
                path.rename(claimed)  # another process may have claimed it
                os.utime(claimed)  # the claim's time, for orphan adoption
            except FileNotFoundError:
                continue
            try:
                raw = claimed.read_bytes()
                head, _, blob = raw.partition(b"\n")
                meta = orjson.loads(head)
            except (OSError, orjson.JSONDecodeError):
                STATS["dropped"] += 1
                log.error("capture dropped: unreadable spool file %s", claimed.name)
                claimed.unlink(missing_ok=True)
                continue
            try:
                self.deliver([(meta, blob)])
            except Exception as exc:
                claimed.rename(path)
                log.info("spooled capture still undeliverable (%r); %d waiting", exc, len(files) - done)
                return done
            claimed.unlink(missing_ok=True)
            STATS["retried"] += 1
            done += 1
        return done

    @staticmethod
    def _adopt_orphans(d: Path) -> None:
        """A claim older than ``CLAIM_TTL`` belongs to a process that died mid-delivery: put it
        back in the spool (a duplicate row is better than a lost capture)."""
        now = time.time()
        for p in d.iterdir():
            if p.suffix.startswith(".claim"):
                try:
                    if now - p.stat().st_mtime > CLAIM_TTL:
                        p.rename(p.with_suffix(".cap"))
                except FileNotFoundError:
                    continue

    def flush(self, timeout: float = 5.0) -> bool:
        """Wait until the queue is drained (tests, shutdown). True when it was."""
        deadline = time.monotonic() + timeout
        while self.queue.unfinished_tasks or self.busy:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)
        return True


    def shutdown(self, timeout: float) -> dict[str, int]:
        """Process exit: let the writer drain the queue to the broker or the database for up to
        ``timeout``; whatever is still queued then goes to the spool (picked up by the next
        process to start), so a record queued at SIGTERM is persisted or spooled, never dropped
        silently. Returns what it did (logged by the caller)."""
        done = {"queued": self.queue.unfinished_tasks, "spooled": 0}
        if self.thread is not None and self.thread.is_alive() and self.flush(timeout):
            return done
        from captures.dump import build, compress

        while True:
            try:
                record = self.queue.get_nowait()
            except queue.Empty:
                break
            try:
                data, meta = build(record)
                self._spool(meta.as_dict(), compress(data))
                done["spooled"] += 1
            except Exception:
                STATS["dropped"] += 1
                log.exception("capture dropped at shutdown: request_id=%s", record.request_id)
            finally:
                self.queue.task_done()
        return done


writer = Writer()
atexit.register(writer.flush, 5.0)


def shutdown(timeout: float | None = None) -> None:
    """The gateway's lifespan shutdown hook (registered by ``gateway.wiring``)."""
    if timeout is None:
        timeout = float(gateway_settings.CAPTURE_FLUSH_SECONDS)
    result = writer.shutdown(timeout)
    if result["queued"] or result["spooled"]:
        log.info("capture queue flushed at shutdown: %d queued, %d spooled", result["queued"], result["spooled"])


def submit(record: CaptureRecord) -> None:
    """Never blocks, never raises: persisting a capture must not touch the client's response."""
    try:
        writer.submit(record)
    except Exception:
        STATS["dropped"] += 1
        log.exception("capture dropped: submit failed")


def stats() -> dict[str, int]:
    return dict(STATS)
