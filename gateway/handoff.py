"""A hand-off from the proxy's event loop to persistence: the machinery captures and request logs
share (``captures.sink``, ``requestlogs.sink``).

``submit`` runs on the proxy's event loop after the client's response is finished. It only puts
the record on a bounded ``queue.Queue``; one daemon writer thread per process and per hand-off
drains it in batches:

1. ``prepare`` turns each record into its payload (a capture builds and compresses its dump; a
   request-log row is already a small dict);
2. ``deliver`` publishes the payloads to Celery (with ``settings.REDIS_URL``) or writes them to
   the database here (without Redis), in one transaction per batch;
3. when that fails (Redis unreachable, database locked) each payload is spooled to
   ``DATA_DIR/<spool_name>`` (temp file + rename) and retried every few seconds, oldest first.
   Several processes may share the spool: a file is claimed by renaming it before delivery.

Nothing here can delay or change the client's response. Every drop (queue full, spool full or
unwritable, a record that cannot be prepared) is counted in ``stats`` and logged.
"""

from __future__ import annotations

import logging
import os
import queue
import re
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from django.conf import settings

CLAIM_TTL = 300.0  # seconds before another process's unfinished claim is taken back
_SAFE = re.compile(r"[^A-Za-z0-9_-]")


class HandOff:
    """One kind of record's writer thread and spool. Subclasses set the class attributes and
    implement ``prepare``, ``deliver``, ``payload_id``, ``encode_spool`` and ``decode_spool``."""

    label = "record"  # in log lines: "<label> dropped: ..."
    thread_name = "handoff-writer"
    spool_name = "spool"  # directory under DATA_DIR
    suffix = ".spool"  # of a spooled payload's file
    batch_max = 64
    queue_max = 1000
    spool_max_bytes = 256 * 1024 * 1024
    retry_seconds = 2.0
    claim_ttl = CLAIM_TTL
    # Seconds to wait for more records once one arrived (0: write what is there at once).
    linger_seconds = 0.0
    # Seconds of idleness before the database connection is given back (0: after every batch
    # that empties the queue; opening a connection again costs more than a small insert).
    idle_release_seconds = 0.0
    stats: Counter[str] = Counter()  # submitted, persisted, published, spooled, retried, dropped
    log = logging.getLogger("gateway.handoff")

    def __init__(self) -> None:
        self.queue: queue.Queue[Any] = queue.Queue(maxsize=self.queue_max)
        self.thread: threading.Thread | None = None
        self.lock = threading.Lock()
        self.busy = False
        self._celery = None
        # What the spool held when last looked at: (directory, pending, when). Listing the
        # directory for every record cost more than writing the record.
        self._spool_seen: tuple[Path, bool, float] | None = None
        self._spool_used: tuple[Path, int] | None = None  # bytes in the spool, kept up to date

    # -- to implement -------------------------------------------------------------------------
    def prepare(self, record: Any) -> Any:
        """The payload delivered for ``record``; raising drops the record (counted)."""
        return record

    def record_id(self, record: Any) -> str:
        return str(getattr(record, "request_id", ""))

    def payload_id(self, payload: Any) -> str:
        return ""

    def deliver(self, payloads: list[Any]) -> None:
        """Publish or write the payloads; raise on failure."""
        raise NotImplementedError

    def encode_spool(self, payload: Any) -> bytes:
        raise NotImplementedError

    def decode_spool(self, data: bytes) -> Any:
        raise NotImplementedError

    def spool_dir(self) -> Path:
        return Path(settings.DATA_DIR) / self.spool_name

    # -- request path -------------------------------------------------------------------------
    def submit(self, record: Any) -> None:
        if self.thread is None or not self.thread.is_alive():
            self._start()
        try:
            self.queue.put_nowait(record)
            self.stats["submitted"] += 1
        except queue.Full:
            self.stats["dropped"] += 1
            self.log.warning(
                "%s dropped: writer queue full (%d records); request_id=%s",
                self.label,
                self.queue_max,
                self.record_id(record),
            )

    def _start(self) -> None:
        with self.lock:
            if self.thread is not None and self.thread.is_alive():
                return
            self.thread = threading.Thread(target=self._run, name=self.thread_name, daemon=True)
            self.thread.start()

    # -- writer thread ------------------------------------------------------------------------
    def _run(self) -> None:
        next_retry = time.monotonic()
        holding_db = False  # a database connection is open since the last batch
        while True:
            timeout = max(0.05, next_retry - time.monotonic()) if self._spool_pending() else None
            if holding_db:
                timeout = (
                    self.idle_release_seconds if timeout is None else min(timeout, self.idle_release_seconds)
                )
            try:
                batch = [self.queue.get(timeout=timeout)]
            except queue.Empty:
                batch = []
                if holding_db and self.queue.empty():
                    self._release_db()
                    holding_db = False
            if batch and self.linger_seconds:
                # Let a burst gather: one transaction for many rows costs little more than one.
                deadline = time.monotonic() + self.linger_seconds
                while len(batch) < self.batch_max and (left := deadline - time.monotonic()) > 0:
                    try:
                        batch.append(self.queue.get(timeout=left))
                    except queue.Empty:
                        break
            while batch and len(batch) < self.batch_max:  # whatever else is waiting goes in one write
                try:
                    batch.append(self.queue.get_nowait())
                except queue.Empty:
                    break
            if batch:
                self.busy = True
                try:
                    self._handle(batch)
                except Exception:  # the thread must survive anything
                    self.log.exception("%s writer failed on a batch", self.label)
                finally:
                    holding_db = True
                    if self.idle_release_seconds <= 0 and self.queue.empty():
                        self._release_db()
                        holding_db = False
                    self.busy = False
                    for _ in batch:
                        self.queue.task_done()
            if time.monotonic() >= next_retry and self._spool_pending():
                self.busy = True
                try:
                    self.retry_spool()
                except Exception:
                    self.log.exception("%s spool retry failed", self.label)
                finally:
                    self._release_db()
                    holding_db = False
                    self.busy = False
                next_retry = time.monotonic() + self.retry_seconds

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

    def _handle(self, records: list[Any]) -> None:
        built: list[Any] = []
        for record in records:
            try:
                built.append(self.prepare(record))
            except Exception:
                self.stats["dropped"] += 1
                self.log.exception(
                    "%s dropped: could not build request_id=%s", self.label, self.record_id(record)
                )
        if not built:
            return
        if self._spool_pending():
            # Keep the order: older spooled payloads go first, these wait behind them.
            self.retry_spool()
            if self._spool_pending():
                for payload in built:
                    self._spool(payload)
                return
        if len(built) > 1:
            try:
                self.deliver(built)
                return
            except Exception as exc:  # one bad row must not cost the others: go one by one
                self.log.warning("%s batch delivery failed (%r); delivering one by one", self.label, exc)
        for payload in built:
            try:
                self.deliver([payload])
            except Exception as exc:
                self.log.warning(
                    "%s delivery failed, spooling request_id=%s: %r",
                    self.label,
                    self.payload_id(payload),
                    exc,
                )
                self._spool(payload)

    def celery_app(self):
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
        """Whether spooled payloads wait. Our own spooling and retries are seen at once; files
        another process spooled are noticed within ``retry_seconds``."""
        d = self.spool_dir()
        now = time.monotonic()
        seen = self._spool_seen
        if seen is not None and seen[0] == d and now - seen[2] < self.retry_seconds:
            return seen[1]
        try:
            pending = any(p.suffix == self.suffix for p in d.iterdir())
        except FileNotFoundError:
            pending = False
        self._spool_seen = (d, pending, now)
        return pending

    def _spool_changed(self) -> None:
        self._spool_seen = None
        self._spool_used = None

    def _used_bytes(self, d: Path) -> int:
        used = self._spool_used
        if used is None or used[0] != d:
            used = (d, sum(p.stat().st_size for p in d.iterdir() if p.is_file()))
        return used[1]

    def _spool(self, payload: Any) -> None:
        d = self.spool_dir()
        rid = self.payload_id(payload)
        try:
            d.mkdir(parents=True, exist_ok=True)
            used = self._used_bytes(d)
            data = self.encode_spool(payload)
            if used + len(data) > self.spool_max_bytes:
                self.stats["dropped"] += 1
                self.log.error("%s dropped: spool full (%d bytes); request_id=%s", self.label, used, rid)
                return
            name = f"{time.time_ns():020d}-{os.getpid()}-{_SAFE.sub('_', rid[:40])}"
            tmp = d / (name + ".tmp")
            tmp.write_bytes(data)
            tmp.rename(d / (name + self.suffix))
            self._spool_seen = (d, True, time.monotonic())
            self._spool_used = (d, used + len(data))
            self.stats["spooled"] += 1
        except Exception:
            self.stats["dropped"] += 1
            self.log.exception("%s dropped: spool not writable; request_id=%s", self.label, rid)

    def retry_spool(self) -> int:
        """Deliver spooled payloads oldest first; stop at the first failure. Returns how many
        were delivered."""
        d = self.spool_dir()
        self._spool_changed()
        try:
            self._adopt_orphans(d)
            files = sorted(p for p in d.iterdir() if p.suffix == self.suffix)
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
                payload = self.decode_spool(claimed.read_bytes())
            except Exception:
                self.stats["dropped"] += 1
                self.log.error("%s dropped: unreadable spool file %s", self.label, claimed.name)
                claimed.unlink(missing_ok=True)
                continue
            try:
                self.deliver([payload])
            except Exception as exc:
                claimed.rename(path)
                self.log.info(
                    "spooled %s still undeliverable (%r); %d waiting", self.label, exc, len(files) - done
                )
                return done
            claimed.unlink(missing_ok=True)
            self.stats["retried"] += 1
            done += 1
        return done

    def _adopt_orphans(self, d: Path) -> None:
        """A claim older than ``claim_ttl`` belongs to a process that died mid-delivery: put it
        back in the spool (a duplicate delivery is better than a lost record)."""
        now = time.time()
        for p in d.iterdir():
            if p.suffix.startswith(".claim"):
                try:
                    if now - p.stat().st_mtime > self.claim_ttl:
                        p.rename(p.with_suffix(self.suffix))
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
