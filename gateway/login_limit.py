"""Failed-login counters for ``gateway.security.LoginRateLimitMiddleware`` (issue 13), shared by
every worker and every instance so that together they admit exactly the configured number of
attempts per window and client address (a per-process count let a guesser spread over N workers
try N times as often).

Each login POST takes a slot *before* the password is checked (``acquire``: atomic, so two
processes racing for the last slot cannot both get it); a failed login keeps its slot, a request
that checked no password gives it back (``release``), a successful login clears the count
(``clear``). Windows are fixed: they open with the first counted attempt and last ``window``
seconds.

- ``RedisLimiter`` (with ``REDIS_URL``): one counter per key, a Lua script does the check and
  ``INCR``/``PEXPIRE`` in one step.
- ``DbLimiter`` (without Redis): one ``LoginThrottle`` row per key, updated under a row lock
  (PostgreSQL ``SELECT ... FOR UPDATE``; SQLite transactions here are ``IMMEDIATE``, which
  serialises them).
- ``LocalLimiter``: the per-process fallback while the shared store is unreachable (a limit that
  is N times looser beats refusing every login or admitting every guess).

Both shared limiters raise ``LimiterUnavailable`` when their store fails, so the caller can fall
back. This module imports neither Django nor redis at the top: a bare ``RedisLimiter`` works in
any process (the tests race two of them from two processes).
"""

from __future__ import annotations

import math
import threading
import time
from typing import Any, Protocol


class LimiterUnavailable(Exception):
    """The shared store (Redis or the database) could not be reached or answered an error."""


class Limiter(Protocol):
    def acquire(self, key: str, limit: int, window: int) -> tuple[bool, int]:
        """(admitted, seconds until the window closes: the Retry-After of a refusal)."""
        ...

    def release(self, key: str) -> None: ...

    def clear(self, key: str) -> None: ...


class LocalLimiter:
    """Fixed windows in this process only; at most ``max_tracked`` keys (oldest forgotten)."""

    def __init__(self, max_tracked: int = 10_000) -> None:
        self.max_tracked = max_tracked
        self._slots: dict[str, list[float]] = {}  # key -> [window start (monotonic), count]
        self._lock = threading.Lock()

    def acquire(self, key: str, limit: int, window: int) -> tuple[bool, int]:
        now = time.monotonic()
        with self._lock:
            slot = self._slots.get(key)
            if slot is None or now - slot[0] >= window:
                if slot is None and len(self._slots) >= self.max_tracked:
                    self._slots.pop(next(iter(self._slots)))
                slot = self._slots[key] = [now, 0]
            if slot[1] >= limit:
                return False, max(1, math.ceil(slot[0] + window - now))
            slot[1] += 1
            return True, 0

    def release(self, key: str) -> None:
        with self._lock:
            slot = self._slots.get(key)
            if slot is not None and slot[1] > 0:
                slot[1] -= 1

    def clear(self, key: str) -> None:
        with self._lock:
            self._slots.pop(key, None)

    def reset(self) -> None:
        with self._lock:
            self._slots.clear()


# KEYS[1]: the counter; ARGV[1]: limit; ARGV[2]: window in ms. Returns {admitted, ms left}.
# A counter without a TTL (never expected) gets one, so no key can lock an address out forever.
_ACQUIRE = """
local n = tonumber(redis.call('GET', KEYS[1]) or '0')
if n < tonumber(ARGV[1]) then
  n = redis.call('INCR', KEYS[1])
  if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
  if redis.call('PTTL', KEYS[1]) < 0 then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
  return {1, redis.call('PTTL', KEYS[1])}
end
if redis.call('PTTL', KEYS[1]) < 0 then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return {0, redis.call('PTTL', KEYS[1])}
"""
_RELEASE = """
if tonumber(redis.call('GET', KEYS[1]) or '0') > 0 then return redis.call('DECR', KEYS[1]) end
return 0
"""


class RedisLimiter:
    """Counters in Redis under ``prefix + key``; every Redis error becomes ``LimiterUnavailable``."""

    def __init__(self, client: Any, prefix: str = "gateway:login:") -> None:
        self.client = client
        self.prefix = prefix
        self._acquire = client.register_script(_ACQUIRE)
        self._release = client.register_script(_RELEASE)

    def acquire(self, key: str, limit: int, window: int) -> tuple[bool, int]:
        admitted, ms_left = self._call(self._acquire, key, limit, window * 1000)
        return bool(admitted), max(1, math.ceil(int(ms_left) / 1000))

    def release(self, key: str) -> None:
        self._call(self._release, key)

    def clear(self, key: str) -> None:
        self._call(lambda keys: self.client.delete(*keys), key)

    def _call(self, fn: Any, key: str, *args: int) -> Any:
        from redis.exceptions import RedisError

        try:
            return fn(keys=[self.prefix + key], args=list(args)) if args else fn(keys=[self.prefix + key])
        except (RedisError, OSError) as exc:
            raise LimiterUnavailable(f"Redis: {exc}") from exc

    @classmethod
    def from_url(cls, url: str) -> RedisLimiter:
        """Short timeouts and no retries: a login must not hang on a dead Redis, it falls back."""
        import redis
        from redis.backoff import NoBackoff
        from redis.retry import Retry

        client = redis.Redis.from_url(
            url, socket_timeout=0.5, socket_connect_timeout=0.5, retry=Retry(NoBackoff(), 0)
        )
        return cls(client)


class DbLimiter:
    """Counters in ``gateway.models.LoginThrottle`` rows; database errors become
    ``LimiterUnavailable``. Expired rows are deleted whenever a new key gets its row."""

    def acquire(self, key: str, limit: int, window: int) -> tuple[bool, int]:
        from django.db import DatabaseError, transaction

        from gateway.models import LoginThrottle

        now = time.time()
        try:
            with transaction.atomic():
                row, created = LoginThrottle.objects.select_for_update().get_or_create(
                    key=key[:200], defaults={"window_start": now, "count": 0}
                )
                if created:
                    LoginThrottle.objects.filter(window_start__lt=now - window).delete()
                if now - row.window_start >= window:
                    row.window_start, row.count = now, 0
                if row.count >= limit:
                    return False, max(1, math.ceil(row.window_start + window - now))
                row.count += 1
                row.save(update_fields=["window_start", "count"])
                return True, 0
        except DatabaseError as exc:
            raise LimiterUnavailable(f"database: {exc}") from exc

    def release(self, key: str) -> None:
        from django.db import DatabaseError
        from django.db.models import F

        from gateway.models import LoginThrottle

        try:
            LoginThrottle.objects.filter(key=key[:200], count__gt=0).update(count=F("count") - 1)
        except DatabaseError as exc:
            raise LimiterUnavailable(f"database: {exc}") from exc

    def clear(self, key: str) -> None:
        from django.db import DatabaseError

        from gateway.models import LoginThrottle

        try:
            LoginThrottle.objects.filter(key=key[:200]).delete()
        except DatabaseError as exc:
            raise LimiterUnavailable(f"database: {exc}") from exc
