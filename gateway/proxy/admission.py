"""A limited request's admission, overlapping its own work (issue 17).

Before, ``serve`` awaited the limiter's Redis round trip before it decoded the body: the
request waited the whole round trip. ``Limiter.begin`` now starts the admission (with the
limiter's pipe connected, its script call is written to Redis at once) and returns an
``Admission``; the request decodes, routes and runs its request rules while Redis answers, and
awaits ``check`` before its first upstream send, or before answering the client anything else
(a decoding error included), so a refused request still sends nothing upstream and gets its
429/402 in its protocol's shape, whatever else was wrong with it.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

from gateway.errors import ClientError

from . import redis_errors

if TYPE_CHECKING:
    from .limits import KeyLimits, Limiter
    from .usage_tap import UsageTap

_UNKNOWN: Any = object()


class Admission:
    """One request's admission, started before its body is decoded (``Limiter.begin``) so the
    Redis round trip overlaps the decoding, routing and request rules; ``check`` is awaited
    before anything goes upstream or to the client, and ``end`` frees and settles once the
    answer is over, but only what the admission took (a refused request, or one whose admission
    never reached Redis, frees nothing). A request cancelled while its admission is in flight
    settles when the reply comes (``end``): the slot taken is not leaked."""

    __slots__ = ("limiter", "key_id", "limits", "now", "result", "reply", "task")

    def __init__(
        self, limiter: Limiter, key_id: int, limits: KeyLimits, now: float, verdict: Any = _UNKNOWN
    ) -> None:
        self.limiter, self.key_id, self.limits, self.now = limiter, key_id, limits, now
        self.result: ClientError | None = verdict  # _UNKNOWN until the reply is read
        self.reply: asyncio.Future[Any] | None = None  # the pipe's script reply (RedisLimiter)
        self.task: asyncio.Task[ClientError | None] | None = None  # a whole ``admit`` otherwise

    async def verdict(self) -> ClientError | None:
        """None when admitted, else the refusal. Cancelling the caller does not cancel the
        admission (``end`` still learns what it took)."""
        if self.result is not _UNKNOWN:
            return self.result
        limiter: Any = self.limiter  # a RedisLimiter: only it leaves the verdict unknown
        reply = self.reply
        if reply is not None:
            try:
                if not reply.done():  # the reply is usually there by now: read it without a loop turn
                    limiter.pipe.poll()
                raw = reply.result() if reply.done() else await asyncio.shield(reply)
            except (redis_errors.NoScriptError, redis_errors.RedisConnectionError):  # a whole ``admit``
                self.reply = None
                self.task = asyncio.get_running_loop().create_task(
                    limiter.admit(self.key_id, self.limits, self.now)
                )
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # Redis down or slow: counted in this worker, as ``admit``
                limiter._failed(exc)
                self.result = limiter.local.admit_now(self.key_id, self.limits, self.now)
                return self.result
            else:
                self.result = limiter.verdict(raw, self.limits, self.now)
                return self.result
        task = self.task
        assert task is not None
        self.result = task.result() if task.done() else await asyncio.shield(task)
        return self.result

    async def check(self) -> None:
        """Raise the refusal (a ``ClientError``: 429/402 in the client's shape) unless admitted."""
        refused = await self.verdict()
        if refused is not None:
            raise refused

    def end(self, tap: UsageTap) -> None:
        """The end of the request, after its answer: free and settle (``finish_later``) when
        admitted, now or when the admission's reply arrives."""
        if self.result is not _UNKNOWN:
            if self.result is None:
                self._finish(tap)
            return
        pending: asyncio.Future[Any] | None = self.reply or self.task
        if pending is None:
            return
        if pending.done():  # now, not from a callback: before the next request's admission
            self._late(pending, tap)
            return
        limiter: Any = self.limiter
        limiter.pending.add(pending)
        pending.add_done_callback(limiter.pending.discard)
        pending.add_done_callback(lambda done: self._late(done, tap))

    def _late(self, done: asyncio.Future[Any], tap: UsageTap) -> None:
        if done.cancelled() or done.exception() is not None:
            return  # never counted in Redis (a NOSCRIPT reply) or unknown (no reply): as before
        raw = done.result()
        admitted = raw is None if done is self.task else not raw[0]
        if admitted:
            self._finish(tap)

    def _finish(self, tap: UsageTap) -> None:
        limits = self.limits
        self.limiter.finish_later(
            self.key_id, limits, tap.tokens, time.time(), tap.cost() if limits.spends else 0
        )
