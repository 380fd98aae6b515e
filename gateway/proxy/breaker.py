"""Passive circuit breaker per channel.

N failures (default 3) within a sliding window (30 s) open a channel for a cooldown (60 s, or
15 s when a 429 tripped it); any success closes it. An open channel is skipped by routing; once
the cooldown has passed it is eligible again (half-open) and the next outcome decides.

The decision is always taken from this process's memory, so the hot path never waits on
Redis. With ``settings.REDIS_URL`` a :class:`RedisMirror` shares state between workers off the
request path: failures and successes are pushed in background tasks (``redis.asyncio``) and the
shared open-until map is pulled every ``PULL_SECONDS`` into the local board.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger("gateway.proxy.breaker")

FAILURE_THRESHOLD = 3
WINDOW_SECONDS = 30.0
COOLDOWN_SECONDS = 60.0
RATE_LIMIT_COOLDOWN_SECONDS = 15.0
MAX_SAMPLES = 1024


@dataclass(slots=True)
class _Entry:
    failures: deque
    open_until: float = 0.0
    remote: bool = False  # opened by another worker (through Redis), not by our own samples


class BreakerBoard:
    """In-process breaker state keyed by channel id. ``clock`` is injectable for tests."""

    __slots__ = ("threshold", "window", "cooldown", "rate_limit_cooldown", "clock", "_entries", "mirror")

    def __init__(
        self,
        *,
        threshold: int = FAILURE_THRESHOLD,
        window: float = WINDOW_SECONDS,
        cooldown: float = COOLDOWN_SECONDS,
        rate_limit_cooldown: float = RATE_LIMIT_COOLDOWN_SECONDS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.threshold = threshold
        self.window = window
        self.cooldown = cooldown
        self.rate_limit_cooldown = rate_limit_cooldown
        self.clock = clock
        self._entries: dict[int, _Entry] = {}
        self.mirror: RedisMirror | None = None

    def is_open(self, channel_id: int) -> bool:
        entry = self._entries.get(channel_id)
        return entry is not None and entry.open_until > self.clock()

    def state(self, channel_id: int) -> str:
        """``closed``, ``open`` or ``half_open`` (cooldown over, waiting for the next outcome)."""
        entry = self._entries.get(channel_id)
        if entry is None or not entry.open_until:
            return "closed"
        return "open" if entry.open_until > self.clock() else "half_open"

    def record_failure(
        self,
        channel_id: int,
        *,
        rate_limited: bool = False,
        threshold: int | None = None,
        window: float | None = None,
        cooldown: float | None = None,
    ) -> bool:
        """Count one transient failure; True when this failure opened the channel. ``threshold``,
        ``window`` and ``cooldown`` are the provider's own settings (None: the board's defaults)."""
        threshold = threshold or self.threshold
        window = window or self.window
        now = self.clock()
        entry = self._entries.get(channel_id)
        if entry is None:
            entry = self._entries[channel_id] = _Entry(failures=deque(maxlen=MAX_SAMPLES))
        samples = entry.failures
        samples.append(now)
        cutoff = now - window
        while samples and samples[0] <= cutoff:
            samples.popleft()
        if entry.open_until > now:  # already open (a late outcome of an earlier attempt)
            return False
        # Half-open (cooldown over, no success since): one more failure re-opens at once.
        opened = bool(entry.open_until) or len(samples) >= threshold
        if opened:
            entry.open_until = now + (
                self.rate_limit_cooldown if rate_limited else (cooldown or self.cooldown)
            )
            entry.remote = False
            samples.clear()
            log.warning("circuit opened for channel %s for %.0f s", channel_id, entry.open_until - now)
        if self.mirror is not None:
            self.mirror.push_failure(channel_id, rate_limited, entry.open_until if opened else None)
        return opened

    def record_success(self, channel_id: int) -> None:
        entry = self._entries.pop(channel_id, None)
        if self.mirror is not None and entry is not None:
            self.mirror.push_success(channel_id)

    def force_open(self, channel_id: int, until: float) -> None:
        """Adopt an open state decided by another worker."""
        entry = self._entries.get(channel_id)
        if entry is None:
            entry = self._entries[channel_id] = _Entry(failures=deque(maxlen=MAX_SAMPLES))
        if until > entry.open_until:
            entry.open_until = until
            entry.remote = True

    def mark_shared(self, channel_id: int) -> None:
        entry = self._entries.get(channel_id)
        if entry is not None and entry.open_until > self.clock():
            entry.remote = True

    def forget_remote(self, open_ids: set[int]) -> None:
        """Close shared open entries that are no longer in the shared map (another worker saw
        a success). Entries opened here but not yet published are kept."""
        now = self.clock()
        for cid, entry in list(self._entries.items()):
            if entry.remote and cid not in open_ids and entry.open_until > now:
                del self._entries[cid]

    def clear(self) -> None:
        self._entries.clear()


class RedisMirror:
    """Shares breaker state through Redis without blocking the event loop.

    Keys: ``gateway:breaker:fail:{id}`` sorted set of failure times (trimmed to the window) and
    the hash ``gateway:breaker:open`` channel id -> open-until unix time.
    """

    OPEN_KEY = "gateway:breaker:open"
    PULL_SECONDS = 0.5

    def __init__(self, board: BreakerBoard, url: str) -> None:
        import redis.asyncio as aioredis

        self.board = board
        self.client = aioredis.Redis.from_url(url, socket_timeout=1, socket_connect_timeout=1)
        self._tasks: set[asyncio.Task] = set()
        self._puller: asyncio.Task | None = None
        board.mirror = self

    def start(self) -> None:
        if self._puller is None:
            self._puller = asyncio.get_running_loop().create_task(self._pull_loop())

    async def stop(self) -> None:
        if self._puller is not None:
            self._puller.cancel()
            self._puller = None
        for task in list(self._tasks):
            task.cancel()
        try:
            await self.client.aclose()
        except Exception:
            pass

    def _spawn(self, coro) -> None:
        try:
            task = asyncio.get_running_loop().create_task(coro)
        except RuntimeError:  # no loop (unit tests driving the board synchronously)
            coro.close()
            return
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def push_failure(self, channel_id: int, rate_limited: bool, opened_until: float | None) -> None:
        self._spawn(self._failure(channel_id, rate_limited, opened_until))

    def push_success(self, channel_id: int) -> None:
        self._spawn(self._success(channel_id))

    async def _failure(self, channel_id: int, rate_limited: bool, opened_until: float | None) -> None:
        board = self.board
        now = board.clock()
        key = f"gateway:breaker:fail:{channel_id}"
        try:
            if opened_until is not None:  # opened locally: publish it
                await self.client.hset(self.OPEN_KEY, str(channel_id), str(opened_until))
                await self.client.delete(key)
                board.mark_shared(channel_id)  # from now on the shared map decides when it closes
                return
            pipe = self.client.pipeline(transaction=False)
            pipe.zadd(key, {f"{now}:{id(pipe)}": now})
            pipe.zremrangebyscore(key, "-inf", now - board.window)
            pipe.zcard(key)
            pipe.expire(key, int(board.window) + 1)
            _, _, count, _ = await pipe.execute()
            if count >= board.threshold:
                until = now + (board.rate_limit_cooldown if rate_limited else board.cooldown)
                await self.client.hset(self.OPEN_KEY, str(channel_id), str(until))
                await self.client.delete(key)
                board.force_open(channel_id, until)
        except (
            Exception
        ) as exc:  # Redis down: a line, not a traceback per failure (each worker's own breaker holds)
            log.warning("could not share a breaker failure through Redis (%s: %s)", type(exc).__name__, exc)

    async def _success(self, channel_id: int) -> None:
        try:
            await self.client.hdel(self.OPEN_KEY, str(channel_id))
            await self.client.delete(f"gateway:breaker:fail:{channel_id}")
        except Exception as exc:
            log.warning("could not share a breaker success through Redis (%s: %s)", type(exc).__name__, exc)

    async def pull_once(self) -> None:
        raw = await self.client.hgetall(self.OPEN_KEY)
        now = self.board.clock()
        open_ids: set[int] = set()
        for k, v in raw.items():
            cid, until = int(k), float(v)
            if until > now:
                open_ids.add(cid)
                self.board.force_open(cid, until)
        self.board.forget_remote(open_ids)

    async def _pull_loop(self) -> None:
        while True:
            try:
                await self.pull_once()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.debug("breaker pull from Redis failed", exc_info=True)
            await asyncio.sleep(self.PULL_SECONDS)
