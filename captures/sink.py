"""Hand-off point from the proxy to capture persistence.

``submit`` runs on the proxy's event loop after the client's response is finished. It only puts
the record on a bounded ``queue.Queue``; one daemon writer thread per process drains it:

1. build the bounded, masked dump and compress it (``captures.dump``);
2. with ``settings.REDIS_URL``: publish ``captures.tasks.persist_capture`` (meta + base64 blob)
   to the ``captures`` queue, for a Celery worker to insert; without Redis: insert the row
   here (``captures.store``) and apply the size budget;
3. when that fails (Redis unreachable, database locked) the blob is spooled to
   ``DATA_DIR/capture-spool`` (temp file + rename, mode 0600) and retried every few seconds,
   oldest first. Several processes may share the spool: a file is claimed by renaming it before
   delivery.

Outages (issue 13). Publishing fails fast (``CAPTURE_BROKER_TIMEOUT`` for connect and send) and
an outage (a connection error or timeout, from the broker or the database) opens a circuit: for
``CAPTURE_BROKER_COOLDOWN_SECONDS`` nothing is tried and whole batches go straight to the spool,
so the writer keeps up with the request rate instead of waiting on a dead broker row by row.
A spooled capture that fails for its own sake (not an outage) is retried with exponential
backoff without blocking the ones behind it, and after ``CAPTURE_DEAD_LETTER_AFTER`` failures
moved to ``capture-spool/dead/`` (counted, logged, listed by ``manage.py capturespool``).
``start`` (at worker start) picks up every spool file, including claims and half-renamed temp
files left by a killed process. ``shutdown`` (lifespan shutdown and ``atexit``) delivers for up
to ``CAPTURE_SHUTDOWN_SECONDS`` and spools the rest of the queue.

What can still be lost is bounded and counted: a SIGKILL loses at most the queue
(``CAPTURE_QUEUE_MAX`` records) plus the batch in flight (``BATCH_MAX``); a full queue or spool
drops and counts. Nothing here can delay or change the client's response. Every drop (queue
full, spool full or unwritable, a record that cannot be serialized) is counted in :data:`STATS`
and logged.

Knobs (environment): ``GATEWAY_CAPTURE_QUEUE_MAX`` (1000 records), ``GATEWAY_CAPTURE_SPOOL_MAX_MB``
(256), ``GATEWAY_CAPTURE_RETRY_SECONDS`` (2), ``GATEWAY_CAPTURE_BROKER_TIMEOUT`` (1),
``GATEWAY_CAPTURE_BROKER_COOLDOWN_SECONDS`` (5), ``GATEWAY_CAPTURE_DEAD_LETTER_AFTER`` (6),
``GATEWAY_CAPTURE_SHUTDOWN_SECONDS`` (5).
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
BROKER_TIMEOUT = gateway_settings.CAPTURE_BROKER_TIMEOUT
COOLDOWN_SECONDS = gateway_settings.CAPTURE_BROKER_COOLDOWN_SECONDS
DEAD_LETTER_AFTER = gateway_settings.CAPTURE_DEAD_LETTER_AFTER
SHUTDOWN_SECONDS = gateway_settings.CAPTURE_SHUTDOWN_SECONDS
MAX_BACKOFF = 300.0  # seconds between retries of one failing spooled capture, at most
CLAIM_TTL = 300.0  # seconds before another process's unfinished claim is taken back
BATCH_MAX = 64  # captures written in one database transaction by the in-process writer
TASK_NAME = "captures.tasks.persist_capture"
TASK_QUEUE = "captures"

STATS: Counter[str] = Counter()  # submitted, persisted, published, spooled, retried, dropped, dead_lettered,
#                                   outages, spooled_at_shutdown, lost_in_flight
_SAFE = re.compile(r"[^A-Za-z0-9_-]")
_CLAIM = re.compile(r"\.claim(\d+)$")


def spool_dir() -> Path:
    return Path(settings.DATA_DIR) / "capture-spool"


def dead_dir() -> Path:
    return spool_dir() / "dead"


class DeliveryPaused(Exception):
    """The circuit around the broker (or database) is open: nothing was tried."""


def is_outage(exc: BaseException) -> bool:
    """Whether a failed delivery says the target is down (retry later, the capture is fine)
    rather than that this capture cannot be written."""
    if isinstance(exc, DeliveryPaused | ConnectionError | TimeoutError | OSError):
        return True
    try:
        from kombu.exceptions import OperationalError as KombuOperationalError

        if isinstance(exc, KombuOperationalError):
            return True
    except ImportError:  # pragma: no cover - kombu comes with celery
        pass
    try:
        from redis.exceptions import ConnectionError as RedisConnectionError
        from redis.exceptions import TimeoutError as RedisTimeoutError

        if isinstance(exc, RedisConnectionError | RedisTimeoutError):
            return True
    except ImportError:  # pragma: no cover
        pass
    from django.db import InterfaceError
    from django.db import OperationalError as DbOperationalError

    return isinstance(exc, DbOperationalError | InterfaceError)


def configure_fail_fast(app: Any, timeout: float | None = None) -> Any:
    """Short connect and send timeouts and no reconnect loop on a Celery app's broker: a publish
    to a dead or silent broker fails within about ``timeout`` seconds."""
    t = BROKER_TIMEOUT if timeout is None else timeout
    opts = dict(app.conf.broker_transport_options or {})
    opts.update(socket_connect_timeout=t, socket_timeout=t, max_retries=0, connect_retries_timeout=t)
    app.conf.broker_transport_options = opts
    app.conf.broker_connection_timeout = t
    return app


def _write_private(path: Path, data: bytes) -> None:
    """Create ``path`` readable by its owner only from the start (captures hold request bodies)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)


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
        self.paused_until = 0.0  # the circuit: until then deliveries are not tried (monotonic)
        self.closing = False  # shutting down: queued captures go to the spool
        self.in_flight = 0  # records of the batch being handled
        self._failures: dict[str, tuple[int, float]] = {}  # spool file -> (failures, next try)
        self._seq = 0

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

    def start(self) -> None:
        """At worker start: take back what dead processes left in the spool (claims, temp
        files), then start the writer thread, which delivers the spool at once."""
        try:
            self._adopt_orphans(spool_dir(), at_start=True)
        except FileNotFoundError:
            pass
        except OSError:
            log.warning("could not inspect the capture spool", exc_info=True)
        self._spool_changed()
        self._start()

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
                self.in_flight = len(batch)
                try:
                    self._handle(batch)
                finally:
                    self.in_flight = 0
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
        built = self._build(records)
        if not built:
            return
        if self.closing or self.paused():
            self._spool_many(built)
            return
        if self._spool_pending():
            # Keep the order: older spooled captures go first, these wait behind them.
            self.retry_spool()
            if self._spool_pending() or self.paused():
                self._spool_many(built)
                return
        try:
            self.deliver(built)
            return
        except Exception as exc:
            if is_outage(exc):  # the target is down: the whole rest of the batch to the spool at once
                log.warning("capture delivery failed (%r); spooling %d", exc, len(built))
                self._spool_many(built)
                return
            if len(built) == 1:
                log.warning("capture delivery failed, spooling request_id=%s: %r", built[0][0].get("request_id"), exc)
                self._spool_many(built)
                return
            log.warning("capture batch delivery failed (%r); delivering one by one", exc)
        for i, row in enumerate(built):  # one bad row must not cost the others
            if self.paused():
                self._spool_many(built[i:])
                return
            try:
                self.deliver([row])
            except Exception as exc:
                log.warning("capture delivery failed, spooling request_id=%s: %r", row[0].get("request_id"), exc)
                self._spool_many([row])

    @staticmethod
    def _build(records: list[CaptureRecord]) -> list[tuple[dict[str, Any], bytes]]:
        from captures.dump import build, compress

        built: list[tuple[dict[str, Any], bytes]] = []
        for record in records:
            try:
                data, meta = build(record)
                built.append((meta.as_dict(), compress(data)))
            except Exception:
                STATS["dropped"] += 1
                log.exception("capture dropped: could not build request_id=%s", record.request_id)
        return built

    # -- the circuit ----------------------------------------------------------------------------
    def paused(self) -> bool:
        return time.monotonic() < self.paused_until

    def _trip(self, exc: BaseException) -> None:
        if not self.paused():
            STATS["outages"] += 1
            log.warning("capture delivery target unavailable (%r); spooling for %.0f s", exc, COOLDOWN_SECONDS)
        self.paused_until = time.monotonic() + COOLDOWN_SECONDS

    def deliver(self, rows: list[tuple[dict[str, Any], bytes]]) -> None:
        """Publish each (meta, blob) to Celery (with Redis) or write the rows here; raises on
        failure. Delivered rows are removed from ``rows`` (with Redis, rows before the failing
        one are already published), so the caller spools exactly what is left. An outage opens
        the circuit; while it is open this raises ``DeliveryPaused`` without trying."""
        if self.paused():
            raise DeliveryPaused()
        try:
            if settings.REDIS_URL:
                app = self._celery_app()
                while rows:
                    meta, blob = rows[0]
                    app.send_task(TASK_NAME, args=[meta, base64.b64encode(blob).decode()], queue=TASK_QUEUE,
                                  retry=False)
                    del rows[0]
                    STATS["published"] += 1
                return
            self._save_rows(rows)
            del rows[:]
        except Exception as exc:
            if is_outage(exc):
                self._trip(exc)
            raise

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
            self._celery = configure_fail_fast(app)
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
        wall = time.time()
        try:
            pending = any(p.suffix == ".cap" and self._failures.get(p.name, (0, 0.0))[1] <= wall
                          for p in d.iterdir())
        except FileNotFoundError:
            pending = False
        self._spool_seen = (d, pending, now)
        return pending

    def _spool_changed(self) -> None:
        self._spool_seen = None

    def _spool(self, meta: dict[str, Any], blob: bytes) -> None:
        self._spool_many([(meta, blob)])

    def _spool_many(self, rows: list[tuple[dict[str, Any], bytes]]) -> None:
        """Write rows to the spool, one file each (so one bad capture can be set aside alone),
        listing the directory once per batch rather than once per row."""
        if not rows:
            return
        d = spool_dir()
        try:
            d.mkdir(mode=0o700, parents=True, exist_ok=True)
            used = sum(p.stat().st_size for p in d.iterdir() if p.is_file())
        except OSError:
            STATS["dropped"] += len(rows)
            log.exception("captures dropped: spool not writable (%d)", len(rows))
            return
        for meta, blob in rows:
            data = orjson.dumps(meta) + b"\n" + blob
            if used + len(data) > SPOOL_MAX_BYTES:
                STATS["dropped"] += 1
                log.error("capture dropped: spool full (%d bytes); request_id=%s", used, meta.get("request_id"))
                continue
            self._seq += 1
            name = (f"{time.time_ns():020d}-{os.getpid()}-{self._seq:06d}-"
                    f"{_SAFE.sub('_', str(meta.get('request_id', ''))[:40])}")
            tmp = d / (name + ".tmp")
            try:
                _write_private(tmp, data)
                tmp.rename(d / (name + ".cap"))
            except OSError:
                STATS["dropped"] += 1
                log.exception("capture dropped: spool not writable; request_id=%s", meta.get("request_id"))
                continue
            used += len(data)
            STATS["spooled"] += 1
        self._spool_changed()

    def retry_spool(self) -> int:
        """Deliver spooled captures oldest first; stop at an outage. A capture that fails for
        its own sake waits (exponential backoff) without blocking the others, and is moved to
        ``dead/`` after ``DEAD_LETTER_AFTER`` failures. Returns how many were delivered."""
        d = spool_dir()
        self._spool_changed()
        try:
            self._adopt_orphans(d)
            files = sorted(p for p in d.iterdir() if p.suffix == ".cap")
        except FileNotFoundError:
            return 0
        done = 0
        now = time.time()
        for path in files:
            if self.paused():
                break
            failures, next_at = self._failures.get(path.name, (0, 0.0))
            if next_at > now:
                continue
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
                if not isinstance(meta, dict):
                    raise ValueError("spool file head is not an object")
            except (OSError, ValueError) as exc:
                self._dead_letter(claimed, path.name, f"unreadable: {exc!r}")
                continue
            try:
                self.deliver([(meta, blob)])
            except Exception as exc:
                claimed.rename(path)
                if is_outage(exc):
                    log.info("spooled capture still undeliverable (%r); %d waiting", exc, len(files) - done)
                    return done
                failures += 1
                if failures >= DEAD_LETTER_AFTER:
                    self._dead_letter(path, path.name, repr(exc))
                    continue
                delay = min(RETRY_SECONDS * (2 ** failures), MAX_BACKOFF)
                self._failures[path.name] = (failures, time.time() + delay)
                log.warning("spooled capture %s failed (%d of %d): %r; next try in %.0f s", path.name, failures,
                            DEAD_LETTER_AFTER, exc, delay)
                continue
            claimed.unlink(missing_ok=True)
            self._failures.pop(path.name, None)
            STATS["retried"] += 1
            done += 1
        self._spool_changed()
        return done

    def _dead_letter(self, path: Path, name: str, why: str) -> None:
        """Move a capture that can never be written out of the way, counted and logged; staff
        see it with ``manage.py capturespool`` (and can requeue it)."""
        self._failures.pop(name, None)
        target = dead_dir()
        try:
            target.mkdir(mode=0o700, parents=True, exist_ok=True)
            path.rename(target / (Path(name).stem + ".cap"))
        except OSError:
            log.exception("could not move spooled capture %s to dead/", name)
            return
        STATS["dead_lettered"] += 1
        log.error("spooled capture %s moved to %s: %s", name, target, why)

    def _adopt_orphans(self, d: Path, *, at_start: bool = False) -> None:
        """Put back in the spool what a process left behind: a claim whose process is gone (or
        older than ``CLAIM_TTL``; a duplicate row is better than a lost capture), and a temp file
        older than a minute whose head is readable (the writer died between write and rename).
        At start our own pid's claims are stale too (the pid was reused)."""
        now = time.time()
        me = os.getpid()
        for p in d.iterdir():
            try:
                if p.suffix.startswith(".claim"):
                    m = _CLAIM.search(p.name)
                    pid = int(m.group(1)) if m else -1
                    stale = (now - p.stat().st_mtime > CLAIM_TTL or (pid == me and at_start)
                             or (pid != me and not _alive(pid)))
                    if stale:
                        p.rename(p.with_suffix(".cap"))
                elif p.suffix == ".tmp" and now - p.stat().st_mtime > 60.0:
                    head = p.read_bytes().partition(b"\n")[0]
                    try:
                        orjson.loads(head)
                    except orjson.JSONDecodeError:
                        self._dead_letter(p, p.name, "half-written temp file")
                        continue
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


    def shutdown(self, timeout: float | None = None) -> None:
        """Deliver what is queued for up to ``timeout`` seconds, then spool the rest from this
        thread. A batch the writer thread is still stuck on is counted as ``lost_in_flight``
        (logged), never silently."""
        timeout = SHUTDOWN_SECONDS if timeout is None else timeout
        if self.flush(timeout * 0.8):
            return
        self.closing = True
        left: list[CaptureRecord] = []
        while True:
            try:
                left.append(self.queue.get_nowait())
            except queue.Empty:
                break
        if left:
            before = STATS["spooled"]
            self._spool_many(self._build(left))
            STATS["spooled_at_shutdown"] += STATS["spooled"] - before
            for _ in left:
                self.queue.task_done()
            log.warning("shutdown: %d queued captures spooled", len(left))
        if not self.flush(max(timeout * 0.2, 0.5)) and self.in_flight:
            STATS["lost_in_flight"] += self.in_flight
            log.error("shutdown: %d captures still being delivered may be lost", self.in_flight)


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


writer = Writer()
atexit.register(writer.shutdown)


def submit(record: CaptureRecord) -> None:
    """Never blocks, never raises: persisting a capture must not touch the client's response."""
    try:
        writer.submit(record)
    except Exception:
        STATS["dropped"] += 1
        log.exception("capture dropped: submit failed")


def stats() -> dict[str, int]:
    return dict(STATS)
