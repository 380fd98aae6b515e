"""The spool half of ``gateway.handoff.HandOff``: payloads that could not be delivered are written
to ``DATA_DIR/<spool_name>`` (one file each, temp file + rename, mode 0600), claimed by renaming
before a retry (several processes may share the spool), backed off or dead-lettered when they
fail for their own sake, and adopted back when a killed process left claims or temp files.
Split from ``handoff.py`` by topic so each module stays under the size limit; ``HandOff``
supplies the settings and hooks declared at the top of ``SpoolFiles``.
"""

from __future__ import annotations

import logging
import os
import re
import stat
import time
from collections import Counter
from pathlib import Path
from typing import Any

from gateway.broker import is_outage

CLAIM_TTL = 300.0  # seconds before another process's unfinished claim is taken back
MAX_BACKOFF = 300.0  # seconds between retries of one failing spooled payload, at most
_SAFE = re.compile(r"[^A-Za-z0-9_-]")
_CLAIM = re.compile(r"\.claim(\d+)$")


def write_private(path: Path, data: bytes) -> None:
    """Create ``path`` readable by its owner only from the start (spooled payloads hold request
    bodies and usage)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)


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


class SpoolFiles:
    """Spooled payload files of one hand-off (mixed into ``HandOff``)."""

    # Supplied by ``HandOff`` (class attributes and ``__init__``).
    label: str
    suffix: str
    spool_max_bytes: int
    retry_seconds: float
    batch_max: int
    claim_ttl: float
    dead_letter_after: int
    max_backoff: float
    stats: Counter[str]
    log: logging.Logger
    _spool_seen: tuple[Path, bool, float] | None
    _spool_used: tuple[Path, int] | None
    _failures: dict[str, tuple[int, float]]
    _seq: int

    def payload_id(self, payload: Any) -> str:
        raise NotImplementedError

    def encode_spool(self, payload: Any) -> bytes:
        raise NotImplementedError

    def decode_spool(self, data: bytes) -> Any:
        raise NotImplementedError

    def spool_dir(self) -> Path:
        raise NotImplementedError

    def dead_dir(self) -> Path:
        raise NotImplementedError

    def paused(self) -> bool:
        raise NotImplementedError

    def _deliver(self, payloads: list[Any]) -> None:
        raise NotImplementedError

    def _spool_pending(self) -> bool:
        """Whether spooled payloads wait (and are not backing off). Our own spooling and retries
        are seen at once; files another process spooled are noticed within ``retry_seconds``."""
        d = self.spool_dir()
        now = time.monotonic()
        seen = self._spool_seen
        if seen is not None and seen[0] == d and now - seen[2] < self.retry_seconds:
            return seen[1]
        wall = time.time()
        try:
            pending = any(
                p.suffix == self.suffix and self._failures.get(p.name, (0, 0.0))[1] <= wall
                for p in d.iterdir()
            )
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
            used = (d, sum(_size(p) for p in d.iterdir()))
        return used[1]

    def _spool(self, payload: Any) -> None:
        self._spool_many([payload])

    def _spool_many(self, payloads: list[Any]) -> None:
        """Write payloads to the spool, one file each (so one bad payload can be set aside
        alone), sizing the directory once per batch rather than once per payload."""
        if not payloads:
            return
        d = self.spool_dir()
        try:
            d.mkdir(mode=0o700, parents=True, exist_ok=True)
            used = self._used_bytes(d)
        except OSError:
            self.stats["dropped"] += len(payloads)
            self.log.exception("%s dropped: spool not writable (%d)", self.label, len(payloads))
            return
        spooled = False
        for payload in payloads:
            rid = self.payload_id(payload)
            try:
                data = self.encode_spool(payload)
            except Exception:
                self.stats["dropped"] += 1
                self.log.exception(
                    "%s dropped: could not encode for the spool; request_id=%s", self.label, rid
                )
                continue
            if used + len(data) > self.spool_max_bytes:
                self.stats["dropped"] += 1
                self.log.error("%s dropped: spool full (%d bytes); request_id=%s", self.label, used, rid)
                continue
            self._seq += 1
            name = f"{time.time_ns():020d}-{os.getpid()}-{self._seq:06d}-{_SAFE.sub('_', rid[:40])}"
            tmp = d / (name + ".tmp")
            try:
                write_private(tmp, data)
                tmp.rename(d / (name + self.suffix))
            except OSError:
                self.stats["dropped"] += 1
                self.log.exception("%s dropped: spool not writable; request_id=%s", self.label, rid)
                continue
            used += len(data)
            spooled = True
            self.stats["spooled"] += 1
        if spooled:
            self._spool_seen = (d, True, time.monotonic())
        self._spool_used = (d, used)

    def retry_spool(self) -> int:
        """Deliver spooled payloads oldest first, ``batch_max`` at a time (one publish or one
        transaction per batch: a backlog of thousands drains in seconds, not at one Celery task
        per payload); stop at an outage. A batch that fails for its own sake is delivered one by
        one, so a payload that cannot be written waits (exponential backoff) without blocking
        the others, and is moved to ``dead/`` after ``dead_letter_after`` failures. Returns how
        many were delivered."""
        d = self.spool_dir()
        self._spool_changed()
        try:
            self._adopt_orphans(d)
            files = sorted(p for p in d.iterdir() if p.suffix == self.suffix)
        except FileNotFoundError:
            return 0
        now = time.time()
        due = [p for p in files if self._failures.get(p.name, (0, 0.0))[1] <= now]
        done = 0
        for i in range(0, len(due), self.batch_max):
            if self.paused():
                break
            delivered, outage = self._redeliver(self._claim(due[i : i + self.batch_max]))
            done += delivered
            if outage:
                self.log.info("spooled %s still undeliverable; %d waiting", self.label, len(files) - done)
                break
        self._spool_changed()
        return done

    def _claim(self, paths: list[Path]) -> list[tuple[Path, Path, Any]]:
        """Claim spool files by renaming them (another process may have claimed one first) and
        decode them; an unreadable one is dead-lettered. (path, claim, payload) each."""
        claimed: list[tuple[Path, Path, Any]] = []
        for path in paths:
            claim = path.with_suffix(f".claim{os.getpid()}")
            try:
                path.rename(claim)
                os.utime(claim)  # the claim's time, for orphan adoption
            except FileNotFoundError:
                continue
            try:
                claimed.append((path, claim, self.decode_spool(claim.read_bytes())))
            except Exception as exc:
                self._dead_letter(claim, path.name, f"unreadable: {exc!r}")
        return claimed

    def _redeliver(self, claimed: list[tuple[Path, Path, Any]]) -> tuple[int, bool]:
        """Deliver claimed payloads as one batch; on a failure that is not an outage, one by one.
        Returns (delivered, whether an outage stopped it); undelivered claims go back."""
        if not claimed:
            return 0, False
        payloads = [payload for _, _, payload in claimed]
        try:
            self._deliver(payloads)
            error = None
        except Exception as exc:
            error = exc
        sent = len(claimed) - len(payloads)  # ``deliver`` removes what it delivered
        for path, claim, _ in claimed[:sent]:
            self._delivered(path, claim)
        rest = claimed[sent:]
        if error is None or not rest:
            return sent, False
        if is_outage(error) or len(rest) == 1:
            self._put_back(rest, error)
            return sent, is_outage(error)
        for i, item in enumerate(rest):  # one bad payload must not cost the others
            try:
                self._deliver([item[2]])
            except Exception as exc:
                if is_outage(exc):
                    self._put_back(rest[i:], exc)
                    return sent, True
                self._put_back([item], exc)
                continue
            self._delivered(item[0], item[1])
            sent += 1
        return sent, False

    def _delivered(self, path: Path, claim: Path) -> None:
        claim.unlink(missing_ok=True)
        self._failures.pop(path.name, None)
        self.stats["retried"] += 1

    def _put_back(self, items: list[tuple[Path, Path, Any]], exc: BaseException) -> None:
        """Put claims back in the spool after a failed delivery; a failure that is not an outage
        counts against the payload (``items`` is then that one payload)."""
        for path, claim, _ in items:
            claim.rename(path)
            if not is_outage(exc):
                self._failed_once(path, self._failures.get(path.name, (0, 0.0))[0] + 1, exc)

    def _failed_once(self, path: Path, failures: int, exc: BaseException) -> None:
        """A spooled payload failed for its own sake: back off, or dead-letter it at the limit."""
        if failures >= self.dead_letter_after:
            self._dead_letter(path, path.name, repr(exc))
            return
        delay = min(self.retry_seconds * (2**failures), self.max_backoff)
        self._failures[path.name] = (failures, time.time() + delay)
        self.log.warning(
            "spooled %s %s failed (%d of %d): %r; next try in %.0f s",
            self.label,
            path.name,
            failures,
            self.dead_letter_after,
            exc,
            delay,
        )

    def _dead_letter(self, path: Path, name: str, why: str) -> None:
        """Move a payload that can never be written out of the way, counted and logged, so the
        ones behind it flow (staff list and requeue captures with ``manage.py capturespool``)."""
        self._failures.pop(name, None)
        target = self.dead_dir()
        try:
            target.mkdir(mode=0o700, parents=True, exist_ok=True)
            path.rename(target / (Path(name).stem + self.suffix))
        except OSError:
            self.log.exception("could not move spooled %s %s to dead/", self.label, name)
            return
        self.stats["dead_lettered"] += 1
        self.log.error("spooled %s %s moved to %s: %s", self.label, name, target, why)

    def _adopt_orphans(self, d: Path, *, at_start: bool = False) -> None:
        """Put back in the spool what a process left behind: a claim whose process is gone (or
        older than ``claim_ttl``; a duplicate delivery is better than a lost record), and a temp
        file older than a minute that decodes (the writer died between write and rename).
        At start our own pid's claims are stale too (the pid was reused)."""
        now = time.time()
        me = os.getpid()
        for p in d.iterdir():
            try:
                if p.suffix.startswith(".claim"):
                    m = _CLAIM.search(p.name)
                    pid = int(m.group(1)) if m else -1
                    stale = (
                        now - p.stat().st_mtime > self.claim_ttl
                        or (pid == me and at_start)
                        or (pid != me and not _alive(pid))
                    )
                    if stale:
                        p.rename(p.with_suffix(self.suffix))
                elif p.suffix == ".tmp" and now - p.stat().st_mtime > 60.0:
                    try:
                        self.decode_spool(p.read_bytes())
                    except Exception:
                        self._dead_letter(p, p.name, "half-written temp file")
                        continue
                    p.rename(p.with_suffix(self.suffix))
            except FileNotFoundError:
                continue


def _size(path: Path) -> int:
    """A spool file's size; 0 for one gone meanwhile. The workers of an instance share the
    spool: another one claims (renames) or delivers (deletes) files while this one sizes the
    directory, and that must not read as "spool not writable" (it dropped a capture in the
    Redis outage test, about one run in four)."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return 0
    return st.st_size if stat.S_ISREG(st.st_mode) else 0
