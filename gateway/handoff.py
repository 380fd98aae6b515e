"""A hand-off from the proxy's event loop to persistence: the machinery captures and request logs
share (``captures.sink``, ``requestlogs.sink``).

``submit`` runs on the proxy's event loop after the client's response is finished. It only puts
the record on a bounded ``queue.Queue``; one daemon writer thread per process and per hand-off
drains it in batches:

1. ``prepare`` turns each record into its payload (a capture builds and compresses its dump; a
   finished request's log recorder builds its row's values);
2. ``deliver`` publishes the payloads to Celery (with ``settings.REDIS_URL``) or writes them to
   the database here (without Redis), in one transaction per batch;
3. when that fails (Redis unreachable, database locked) the payloads are spooled to
   ``DATA_DIR/<spool_name>`` (one file each, temp file + rename, mode 0600) and retried every few
   seconds, oldest first. Several processes may share the spool: a file is claimed by renaming
   it before delivery.

Outages (issue 13). Publishing fails fast (``broker_timeout`` for connect and send) and an outage
(a connection error or timeout, from the broker or the database) opens a circuit: for
``cooldown_seconds`` nothing is tried and whole batches go straight to the spool, so the writer
keeps up with the request rate instead of waiting on a dead broker row by row. While the circuit
is open the writer pings the broker every ``probe_seconds`` (one Redis PING, ``broker_timeout``
at most) and closes the circuit as soon as it answers: the spool then drains in batches (one
publish per ``batch_max`` payloads), so a backlog is written within seconds of the broker's
return instead of waiting out the cooldown and a publish per payload. A spooled payload
that fails for its own sake (not an outage) is retried with exponential backoff without blocking
the ones behind it, and after ``dead_letter_after`` failures moved to ``<spool>/dead/`` (counted,
logged; ``manage.py capturespool`` lists the capture spool). ``start`` (at worker start) picks up
every spool file, including claims and half-renamed temp files left by a killed process.
``shutdown`` (lifespan shutdown and ``atexit``) delivers for up to ``shutdown_seconds`` and spools
the rest of the queue.

What can still be lost is bounded and counted: a SIGKILL loses at most the queue (``queue_max``)
plus the batch in flight (``batch_max``); a full queue or spool drops and counts. Nothing here can
delay or change the client's response. Every drop (queue full, spool full or unwritable, a record
that cannot be prepared) is counted in ``stats`` and logged.

The outage knobs default to ``GATEWAY_CAPTURE_BROKER_TIMEOUT``, ``..._BROKER_COOLDOWN_SECONDS``,
``..._DEAD_LETTER_AFTER`` and ``..._SHUTDOWN_SECONDS`` for every hand-off (their names predate
the shared class).
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
import weakref
from collections import Counter, deque
from pathlib import Path
from typing import Any

from django.conf import settings

from gateway.broker import DeliveryPaused, configure_fail_fast, is_outage
from gateway.conf import gateway_settings
from gateway.handoff_spool import CLAIM_TTL, MAX_BACKOFF, SpoolFiles

_handoffs: weakref.WeakSet[HandOff] = weakref.WeakSet()


def _after_fork() -> None:
    """A forked child has none of its parent's threads: its first ``submit`` starts a writer."""
    for handoff in list(_handoffs):
        handoff.running = False


os.register_at_fork(after_in_child=_after_fork)


class HandOff(SpoolFiles):
    """One kind of record's writer thread and spool. Subclasses set the class attributes and
    implement ``prepare``, ``deliver``, ``payload_id``, ``encode_spool`` and ``decode_spool``.
    The spool files are handled by ``SpoolFiles`` (``gateway.handoff_spool``)."""

    label = "record"  # in log lines: "<label> dropped: ..."
    thread_name = "handoff-writer"
    spool_name = "spool"  # directory under DATA_DIR
    suffix = ".spool"  # of a spooled payload's file
    batch_max = 64
    queue_max = 1000
    spool_max_bytes = 256 * 1024 * 1024
    retry_seconds = 2.0
    claim_ttl = CLAIM_TTL
    broker_timeout = gateway_settings.CAPTURE_BROKER_TIMEOUT
    cooldown_seconds = gateway_settings.CAPTURE_BROKER_COOLDOWN_SECONDS
    dead_letter_after = gateway_settings.CAPTURE_DEAD_LETTER_AFTER
    shutdown_seconds = gateway_settings.CAPTURE_FLUSH_SECONDS
    max_backoff = MAX_BACKOFF
    # While the circuit is open: seconds between probes of the broker (a Redis PING); the circuit
    # closes when one answers, so delivery resumes within about this long of the broker's return.
    probe_seconds = 0.25
    # Seconds to wait for more records once one arrived (0: write what is there at once).
    linger_seconds = 0.0
    # Seconds of idleness before the database connection is given back (0: after every batch
    # that empties the queue; opening a connection again costs more than a small insert).
    idle_release_seconds = 0.0
    # Through a broker, a batch published in the moments before it stopped can still be lost
    # there: a Celery worker's consumer pops a message (BRPOP) and records it as unacked in a
    # second round trip, and a broker that stops in between takes the message with it
    # (kombu's Redis transport; seen in tests/resilience). When the circuit opens, the batches
    # published in the last ``resend_seconds`` before the latest publish are spooled again, so
    # they are delivered twice; 0 turns this off. Only for records whose writes skip an id
    # already stored (request logs: ON CONFLICT DO NOTHING; captures: ids looked up first).
    resend_seconds = 0.0
    busy_share = 1.0  # share of a core the writer may take while the loop is busy (``_yield``)
    drop_log_seconds = 1.0  # at most one "dropped: writer queue full" line per this many seconds
    # submitted, persisted, published, spooled, retried, dropped, dead_lettered, outages,
    # spooled_at_shutdown, lost_in_flight
    stats: Counter[str] = Counter()
    log = logging.getLogger("gateway.handoff")

    def __init__(self) -> None:
        self.queue: queue.Queue[Any] = queue.Queue(maxsize=self.queue_max)
        self.thread: threading.Thread | None = None
        self.running = False  # the writer thread runs (set by ``_start``, cleared when it ends)
        _handoffs.add(self)
        self.lock = threading.Lock()
        self.busy = False
        self._celery = None
        # What the spool held when last looked at: (directory, pending, when). Listing the
        # directory for every record cost more than writing the record.
        self._spool_seen: tuple[Path, bool, float] | None = None
        self._spool_used: tuple[Path, int] | None = None  # bytes in the spool, kept up to date
        self.paused_until = 0.0  # the circuit: until then deliveries are not tried (monotonic)
        self._probe_at = 0.0  # when the open circuit's next probe of the broker is due (monotonic)
        self.closing = False  # shutting down: queued records go to the spool
        self.in_flight = 0  # records of the batch being handled
        self._failures: dict[str, tuple[int, float]] = {}  # spool file -> (failures, next try)
        self._seq = 0
        self._drops_unlogged = 0  # queue-full drops since the last log line
        self._prep_times = (0.0, 0.0)  # wall and CPU seconds the last batch's prepare step took
        self._drop_logged_at = -1e9
        self._published: deque[tuple[float, list[Any]]] = deque()  # (when, payloads): ``resend_seconds``

    # -- to implement -------------------------------------------------------------------------
    def prepare(self, record: Any) -> Any:
        """The payload delivered for ``record``; raising drops the record (counted)."""
        return record

    def record_id(self, record: Any) -> str:
        return str(getattr(record, "request_id", ""))

    def payload_id(self, payload: Any) -> str:
        return ""

    def deliver(self, payloads: list[Any]) -> None:
        """Publish or write the payloads; raise on failure. An implementation that delivers one
        by one removes what it delivered from ``payloads`` so that only the rest is spooled."""
        raise NotImplementedError

    def encode_spool(self, payload: Any) -> bytes:
        raise NotImplementedError

    def decode_spool(self, data: bytes) -> Any:
        raise NotImplementedError

    def spool_dir(self) -> Path:
        return Path(settings.DATA_DIR) / self.spool_name

    def dead_dir(self) -> Path:
        return self.spool_dir() / "dead"

    # -- request path -------------------------------------------------------------------------
    def submit(self, record: Any) -> None:
        """``Queue.put_nowait`` without its Python layers: one hold of the queue's lock, and a
        wake-up only when the writer waits for one (``_drain`` and ``_done`` work under the same
        lock). Per request, ``put_nowait`` and ``Thread.is_alive`` were about a dozen Python
        calls on the event loop; the writer thread's liveness is its own flag (``_run``)."""
        if not self.running:
            self._start()
        q = self.queue
        with q.mutex:
            if len(q.queue) < q.maxsize:
                q.queue.append(record)
                q.unfinished_tasks += 1
                if q.not_empty._waiters:  # type: ignore[attr-defined]  # the writer waits in get()
                    q.not_empty.notify()
                queued = True
            else:
                queued = False
        if queued:
            self.stats["submitted"] += 1
        else:
            self.shed(self.record_id(record))

    def full(self) -> bool:
        """Whether a record submitted now would be dropped (a lock-free look at the queue)."""
        return len(self.queue.queue) >= self.queue_max

    def shed(self, record_id: str = "") -> None:
        """Count a record dropped because the writer is behind (the queue is full): under overload
        that is most requests, so one log line per ``drop_log_seconds`` says how many."""
        self.stats["dropped"] += 1
        self._drops_unlogged += 1
        now = time.monotonic()
        if now - self._drop_logged_at >= self.drop_log_seconds:
            self._log_drops(f"request_id={record_id}")
            self._drop_logged_at = now

    def _log_drops(self, tail: str) -> None:
        self.log.warning(
            "%s dropped: writer queue full (%d records); %d dropped since the last such line; %s",
            self.label,
            self.queue_max,
            self._drops_unlogged,
            tail,
        )
        self._drops_unlogged = 0

    def start(self) -> None:
        """At worker start: take back what dead processes left in the spool (claims, temp
        files), then start the writer thread, which delivers the spool at once."""
        try:
            self._adopt_orphans(self.spool_dir(), at_start=True)
        except FileNotFoundError:
            pass
        except OSError:
            self.log.warning("could not inspect the %s spool", self.label, exc_info=True)
        self._spool_changed()
        self._start()

    def _start(self) -> None:
        with self.lock:
            if self.thread is not None and self.thread.is_alive():
                return
            self.thread = threading.Thread(target=self._run, name=self.thread_name, daemon=True)
            self.running = True
            self.thread.start()

    # -- writer thread ------------------------------------------------------------------------
    def _run(self) -> None:
        try:
            self._loop()
        finally:
            self.running = False

    def _loop(self) -> None:
        next_retry = time.monotonic()
        holding_db = False  # a database connection is open since the last batch
        while True:
            timeout = max(0.05, next_retry - time.monotonic()) if self._spool_pending() else None
            if self.paused():  # wake for the next probe of the broker
                wait = max(0.05, self._probe_at - time.monotonic())
                timeout = wait if timeout is None else min(timeout, wait)
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
            if batch and self.linger_seconds and not self.closing:
                # Let a burst gather: one transaction for many rows costs little more than one.
                # One sleep, not a waiting get() per record: a waiting get() wakes this thread
                # (which then takes the GIL from the event loop) for every record submitted.
                time.sleep(self.linger_seconds)
            if batch:  # whatever else is waiting goes in one write
                self._drain(batch)
            if batch:
                self.busy = True
                self.in_flight = len(batch)
                cpu = time.thread_time()
                try:
                    self._handle(batch)
                except Exception:  # the thread must survive anything
                    self.log.exception("%s writer failed on a batch", self.label)
                finally:
                    self._yield(time.thread_time() - cpu)
                    self.in_flight = 0
                    holding_db = True
                    if self.idle_release_seconds <= 0 and self.queue.empty():
                        self._release_db()
                        holding_db = False
                    self.busy = False
                    self._done(len(batch))
            if self._reclose_if_back():
                next_retry = time.monotonic()  # the broker is back: deliver the spool now
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

    def _drain(self, batch: list[Any]) -> None:
        """Move what is queued into ``batch``, up to ``batch_max``, under one hold of the queue's
        lock: ``get_nowait`` per record and ``task_done`` per record each took and released the
        lock through ``Condition`` in Python, about 1.3 µs of the writer's CPU per record."""
        q = self.queue
        with q.mutex:
            take = min(len(q.queue), self.batch_max - len(batch))
            if take > 0:
                pop = q.queue.popleft
                batch.extend([pop() for _ in range(take)])
                q.not_full.notify(take)

    def _done(self, count: int) -> None:
        """``task_done`` for ``count`` records at once (``flush`` and ``Queue.join`` wait on it)."""
        q = self.queue
        with q.all_tasks_done:
            left = q.unfinished_tasks - count
            if left < 0:
                raise ValueError("task_done() called too many times")
            if left == 0:
                q.all_tasks_done.notify_all()
            q.unfinished_tasks = left

    def _yield(self, cpu: float) -> None:
        """Keep to ``busy_share`` of a core while the event loop is busy and the writer behind.
        Busy: the batch's prepare step (pure CPU, no I/O) took 1.25x its own CPU time or more, so
        the thread waited for the GIL (or a core). Behind: records queued up meanwhile. Then
        the thread sleeps for ``cpu * (1 / share - 1)`` and the loop keeps the rest; the queue
        fills and new captures are shed (counted) instead of slowing every request. A writer
        that keeps up, or a process whose loop is idle, is never slowed."""
        wall_prep, cpu_prep = self._prep_times
        if (
            self.busy_share >= 1.0
            or self.closing
            or cpu <= 0.0
            or wall_prep < 1.25 * cpu_prep
            or not self.queue.qsize()
        ):
            return
        time.sleep(min(cpu * (1.0 / self.busy_share - 1.0), 1.0))

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

    def _build(self, records: list[Any]) -> list[Any]:
        built: list[Any] = []
        for record in records:
            try:
                built.append(self.prepare(record))
            except Exception:
                self.stats["dropped"] += 1
                self.log.exception(
                    "%s dropped: could not build request_id=%s", self.label, self.record_id(record)
                )
        return built

    def _handle(self, records: list[Any]) -> None:
        wall, cpu = time.perf_counter(), time.thread_time()
        built = self._build(records)
        self._prep_times = (time.perf_counter() - wall, time.thread_time() - cpu)
        if not built:
            return
        if self.closing or self.paused():
            self._spool_many(built)
            return
        if self._spool_pending():
            # Keep the order: older spooled payloads go first, these wait behind them.
            self.retry_spool()
            if self._spool_pending() or self.paused():
                self._spool_many(built)
                return
        try:
            self._deliver(built)
            return
        except Exception as exc:
            if is_outage(exc):  # the target is down: the whole rest of the batch to the spool at once
                self.log.warning("%s delivery failed (%r); spooling %d", self.label, exc, len(built))
                self._spool_many(built)
                return
            if len(built) == 1:
                self.log.warning(
                    "%s delivery failed, spooling request_id=%s: %r",
                    self.label,
                    self.payload_id(built[0]),
                    exc,
                )
                self._spool_many(built)
                return
            self.log.warning("%s batch delivery failed (%r); delivering one by one", self.label, exc)
        for i, payload in enumerate(built):  # one bad row must not cost the others
            if self.paused():
                self._spool_many(built[i:])
                return
            try:
                self._deliver([payload])
            except Exception as exc:
                self.log.warning(
                    "%s delivery failed, spooling request_id=%s: %r",
                    self.label,
                    self.payload_id(payload),
                    exc,
                )
                self._spool_many([payload])

    def _deliver(self, payloads: list[Any]) -> None:
        """``deliver`` behind the circuit: while it is open this raises ``DeliveryPaused``
        without trying; an outage opens it. What ``deliver`` removed from ``payloads`` is
        delivered; what is left is the caller's to spool."""
        if self.paused():
            raise DeliveryPaused()
        keep = list(payloads) if self.resend_seconds and settings.REDIS_URL else None
        try:
            self.deliver(payloads)
        except Exception as exc:
            if keep is not None:  # what went out before the failure
                self._remember(keep[: len(keep) - len(payloads)])
            if is_outage(exc):
                self._trip(exc)
            raise
        if keep is not None:
            self._remember(keep)
        del payloads[:]

    def _remember(self, published: list[Any]) -> None:
        """Keep what was just published for ``resend_seconds`` (counted from the latest publish,
        so the last batches before a quiet spell are kept until the next one)."""
        if not published:
            return
        now = time.monotonic()
        recent = self._published
        recent.append((now, published))
        while recent and recent[0][0] < now - self.resend_seconds:
            recent.popleft()

    # -- the circuit ----------------------------------------------------------------------------
    def paused(self) -> bool:
        return time.monotonic() < self.paused_until

    def _trip(self, exc: BaseException) -> None:
        if not self.paused():
            self.stats["outages"] += 1
            self.log.warning(
                "%s delivery target unavailable (%r); spooling for %.0f s",
                self.label,
                exc,
                self.cooldown_seconds,
            )
            self._resend_recent()
        self.paused_until = time.monotonic() + self.cooldown_seconds

    def _resend_recent(self) -> None:
        """Spool again what was published just before the broker went away (``resend_seconds``)."""
        again = [p for _, published in self._published for p in published]
        self._published.clear()
        if again:
            self.stats["resent"] += len(again)
            self.log.warning(
                "%s: %d published in the last %.0f s before the outage spooled again (the broker "
                "may have lost them; stored ids are skipped)",
                self.label,
                len(again),
                self.resend_seconds,
            )
            self._spool_many(again)

    def _reclose_if_back(self) -> bool:
        """While the circuit is open, probe the target every ``probe_seconds``; close the circuit
        when it answers (True), so delivery resumes within a probe interval of its return rather
        than at the end of the cooldown (which every failed try during the outage restarts)."""
        now = time.monotonic()
        if not self.paused() or now < self._probe_at:
            return False
        self._probe_at = now + self.probe_seconds
        if not self.probe():
            return False
        self.paused_until = 0.0
        self.log.info("%s delivery target reachable again; delivering the spool", self.label)
        return True

    def probe(self) -> bool:
        """Whether the broker answers a PING within ``broker_timeout`` (without Redis the target is
        the database: False, the cooldown decides). A new connection each time: the pool's may be
        the broken one, and this runs only while the circuit is open."""
        if not settings.REDIS_URL:
            return False
        import redis

        client = redis.Redis.from_url(
            settings.REDIS_URL, socket_connect_timeout=self.broker_timeout, socket_timeout=self.broker_timeout
        )
        try:
            return bool(client.ping())
        except (redis.RedisError, OSError):
            return False
        finally:
            client.close()

    def celery_app(self):
        if self._celery is None:
            from gateway.celery import app

            # Fail fast instead of hanging the writer on a broker that does not answer.
            self._celery = configure_fail_fast(app, self.broker_timeout)
        return self._celery

    def flush(self, timeout: float = 5.0) -> bool:
        """Wait until the queue is drained (tests, shutdown). True when it was."""
        deadline = time.monotonic() + timeout
        while self.queue.unfinished_tasks or self.busy:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)
        return True

    def shutdown(self, timeout: float | None = None) -> dict[str, int]:
        """Process exit (the lifespan shutdown hook, ``CAPTURE_FLUSH_SECONDS``): deliver what is
        queued to the broker or the database for up to ``timeout`` seconds, then spool the rest
        from this thread (the next process to start picks it up), so a record queued at SIGTERM is
        persisted or spooled, never dropped silently. A batch the writer thread is still stuck on
        is counted as ``lost_in_flight`` (logged). Returns what it found queued and what it spooled."""
        timeout = self.shutdown_seconds if timeout is None else timeout
        if self._drops_unlogged:
            self._log_drops("at shutdown")
        done = {"queued": self.queue.unfinished_tasks, "spooled": 0}
        if self.flush(timeout * 0.8):
            return done
        self.closing = True
        left: list[Any] = []
        while True:
            try:
                left.append(self.queue.get_nowait())
            except queue.Empty:
                break
        if left:
            before = self.stats["spooled"]
            self._spool_many(self._build(left))
            spooled = self.stats["spooled"] - before
            self.stats["spooled_at_shutdown"] += spooled
            done["spooled"] = spooled
            for _ in left:
                self.queue.task_done()
            self.log.warning("shutdown: %d queued %s records spooled", len(left), self.label)
        if not self.flush(max(timeout * 0.2, 0.5)) and self.in_flight:
            self.stats["lost_in_flight"] += self.in_flight
            self.log.error(
                "shutdown: %d %s records still being delivered may be lost", self.in_flight, self.label
            )
        return done
