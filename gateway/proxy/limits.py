"""Per-key limits: requests and tokens per minute, concurrent requests, daily and total spend
caps, and the client-IP allow-list, enforced before anything goes upstream.

Windows are fixed minutes (``floor(now / 60)``): a key with ``rpm: 60`` is admitted exactly 60
times in each minute, across every worker and instance when Redis is configured (one Lua script
per admission, so check and count are atomic). Token limits are settled with the usage the
upstream reported once the response is over; a request is refused while the minute's settled
tokens have reached the limit. Spend caps work the same way with the request's cost (from the
channel model's prices and the reported usage, in nano-USD): a request is refused with 402 while
the day's (UTC) or the key's total spend has reached its cap. The counters start from what the
request logs held when the snapshot was built (``spent_today`` / ``spent_total``), so a restart
or a Redis flush does not forget earlier spend. Without Redis, or while Redis cannot be reached, each worker
counts on its own (``LocalLimiter``): limits then hold per worker, which is logged once.

A key without limits never reaches this module: ``KeySnap.limits`` is ``None`` and the pipeline
skips it with one attribute check.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from gateway.errors import ClientError

from . import redis_errors
from .admission import Admission
from .limits_scripts import ADMIT_LUA, ADMIT_SHA, FINISH_LUA, FINISH_SHA, KINDS
from .redis_pipe import RedisPipe, encode, encode_ints

log = logging.getLogger("gateway.proxy.limits")

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
WINDOW = 60  # seconds
CONCURRENCY_TTL = 600  # a worker killed mid-request frees its slots after this long


@dataclass(slots=True, frozen=True)
class KeyLimits:
    rpm: int | None = None
    tpm: int | None = None
    concurrency: int | None = None
    daily_spend: int | None = None  # nano-USD
    total_spend: int | None = None  # nano-USD
    ip_allow: tuple[IPNetwork, ...] = ()
    spent_day: str = ""  # the UTC day ``spent_today`` counts (YYYYMMDD)
    spent_today: int = 0  # nano-USD in the request logs when the snapshot was built
    spent_total: int = 0

    @property
    def counted(self) -> bool:
        """Whether admission needs the limiter (the IP allow-list does not)."""
        return bool(self.rpm or self.tpm or self.concurrency or self.daily_spend or self.total_spend)

    @property
    def spends(self) -> bool:
        return bool(self.daily_spend or self.total_spend)


NANO = Decimal(10**9)


def parse_limits(
    limits: Mapping[str, Any] | None,
    ip_allow: list[str] | None,
    *,
    spent_day: str = "",
    spent_today: int = 0,
    spent_total: int = 0,
) -> KeyLimits | None:
    """The snapshot's form of an API key's stored ``limits`` and ``ip_allow``; None when neither
    limits anything."""
    limits = limits or {}
    nets = tuple(ipaddress.ip_network(str(n), strict=False) for n in ip_allow or ())
    parsed = KeyLimits(
        rpm=limits.get("rpm") or None,
        tpm=limits.get("tpm") or None,
        concurrency=limits.get("concurrency") or None,
        daily_spend=_nano(limits.get("daily_spend")),
        total_spend=_nano(limits.get("total_spend")),
        ip_allow=nets,
        spent_day=spent_day,
        spent_today=spent_today,
        spent_total=spent_total,
    )
    return parsed if parsed.counted or parsed.ip_allow else None


def _nano(usd: Any) -> int | None:
    return int(Decimal(str(usd)) * NANO) if usd not in (None, "") else None


def utc_day(now: float) -> str:
    return time.strftime("%Y%m%d", time.gmtime(now))


def _until_midnight(now: float) -> int:
    return max(1, 86400 - int(now) % 86400)


# -- client IP -------------------------------------------------------------------------------------


def client_ip(scope: Mapping[str, Any], headers: Mapping[str, str], trusted: tuple[IPNetwork, ...]) -> str:
    """The client's address: the socket peer, or the first untrusted hop of ``X-Forwarded-For``
    (else ``X-Real-IP``) when the peer is a trusted proxy (loopback by default), so a client
    cannot claim an address. The launcher turns uvicorn's own ``X-Forwarded-For`` handling off:
    this is the one place that reads it, for the allow-lists, ``/metrics`` and the request log."""
    client = scope.get("client")
    peer = client[0] if client else ""
    if not trusted:
        return peer
    return forwarded_client(peer, headers.get("x-forwarded-for") or headers.get("x-real-ip") or "", trusted)


def forwarded_client(peer: str, forwarded: str, trusted: tuple[IPNetwork, ...]) -> str:
    """``client_ip`` for a peer address and its forwarding header's value (Django's
    ``REMOTE_ADDR`` and ``HTTP_X_FORWARDED_FOR``)."""
    if not trusted or not forwarded or not _trusted_peer(peer, trusted):
        return peer
    return _forwarded_client(peer, forwarded, trusted)


def _forwarded_client(peer: str, forwarded: str, trusted: tuple[IPNetwork, ...]) -> str:
    """The last hop that is not a trusted proxy, as an address (a port some proxies append is
    dropped). A hop there that is no address (``unknown``, garbage a proxy passed on) names
    nobody: "" matches no allow-list (fail closed) and is stored as no address (a PostgreSQL
    ``inet`` column refuses anything else, which would have failed the row's whole batch)."""
    for hop in reversed(forwarded.split(",")):
        hop = hop.strip()
        if not hop:
            continue
        addr = _address(hop)
        if addr is None:
            return ""
        if not any(addr in net for net in trusted):
            return str(addr)
    return peer


def _address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """``text`` as an address: ``1.2.3.4``, ``1.2.3.4:5678``, ``2001:db8::1``, ``[2001:db8::1]``
    or ``[2001:db8::1]:443``; an IPv4-mapped IPv6 address as its IPv4 one; else None."""
    if text.startswith("["):
        text = text[1 : text.find("]")] if "]" in text else text
    elif text.count(":") == 1:
        text = text.partition(":")[0]
    try:
        addr = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        return addr.ipv4_mapped
    return addr


# peer address -> (the trusted networks it was checked against, whether they contain it). Every
# request asks about its peer, and parsing the address was most of ``client_ip``'s cost; peers
# repeat (a proxy, a few clients), so the answer is kept, up to ``_TRUST_SEEN_MAX`` addresses.
_trust_seen: dict[str, tuple[tuple[IPNetwork, ...], bool]] = {}
_TRUST_SEEN_MAX = 4096


def _trusted_peer(peer: str, trusted: tuple[IPNetwork, ...]) -> bool:
    seen = _trust_seen.get(peer)
    if seen is not None and seen[0] is trusted:
        return seen[1]
    verdict = _in(peer, trusted)
    if len(_trust_seen) >= _TRUST_SEEN_MAX:
        _trust_seen.clear()
    _trust_seen[peer] = (trusted, verdict)
    return verdict


def ip_allowed(limits: KeyLimits, ip: str) -> bool:
    return not limits.ip_allow or _in(ip, limits.ip_allow)


def _in(ip: str, nets: tuple[IPNetwork, ...]) -> bool:
    addr = _address(ip)
    return addr is not None and any(addr in net for net in nets)


# -- refusals --------------------------------------------------------------------------------------


def refusal(kind: str, limit: int, retry_after: int) -> ClientError:
    """The client's answer in its protocol's shape, with ``Retry-After``: 429 for rates, 402 for
    spend caps (the reference's codes)."""
    if kind in ("daily_spend", "total_spend"):
        usd = format((Decimal(limit) / NANO).normalize(), "f")
        code, what = (
            ("api_key_daily_limit_reached", f"its daily spend cap of ${usd} (UTC day)")
            if kind == "daily_spend"
            else ("api_key_spend_limit_reached", f"its total spend cap of ${usd}")
        )
        return ClientError(
            402,
            code,
            f"this API key has reached {what}",
            error_type="permission_error",
            headers=((b"retry-after", str(retry_after).encode()),) if kind == "daily_spend" else (),
        )
    what = {
        "rpm": f"{limit} requests per minute",
        "tpm": f"{limit} tokens per minute",
        "concurrency": f"{limit} concurrent requests",
    }[kind]
    return ClientError(
        429,
        "rate_limit_exceeded",
        f"this API key is limited to {what}; retry in {retry_after} s",
        error_type="rate_limit_error",
        headers=((b"retry-after", str(retry_after).encode()),),
    )


def _retry_after(now: float) -> int:
    return max(1, WINDOW - int(now) % WINDOW)


# -- limiters --------------------------------------------------------------------------------------


class LocalLimiter:
    """Counts in this worker's memory (no Redis, or Redis unreachable)."""

    def __init__(self) -> None:
        self.requests: dict[tuple[int, int], int] = {}
        self.tokens: dict[tuple[int, int], int] = {}
        self.active: dict[int, int] = {}
        self.spent: dict[tuple[int, str], int] = {}  # (key, UTC day or "total") -> nano-USD

    def _spent(self, key_id: int, limits: KeyLimits, day: str) -> tuple[int, int]:
        today = self.spent.setdefault((key_id, day), limits.spent_today if limits.spent_day == day else 0)
        return today, self.spent.setdefault((key_id, "total"), limits.spent_total)

    async def admit(self, key_id: int, limits: KeyLimits, now: float) -> ClientError | None:
        return self.admit_now(key_id, limits, now)

    def begin(self, key_id: int, limits: KeyLimits, now: float) -> Admission:
        """The admission as ``RedisLimiter.begin`` starts it; in memory the verdict is known now."""
        return Admission(self, key_id, limits, now, verdict=self.admit_now(key_id, limits, now))

    def admit_now(self, key_id: int, limits: KeyLimits, now: float) -> ClientError | None:
        if limits.spends:
            today, total = self._spent(key_id, limits, utc_day(now))
            if limits.daily_spend and today >= limits.daily_spend:
                return refusal("daily_spend", limits.daily_spend, _until_midnight(now))
            if limits.total_spend and total >= limits.total_spend:
                return refusal("total_spend", limits.total_spend, 0)
        window = int(now // WINDOW)
        if limits.tpm and self.tokens.get((key_id, window), 0) >= limits.tpm:
            return refusal("tpm", limits.tpm, _retry_after(now))
        if limits.concurrency and self.active.get(key_id, 0) >= limits.concurrency:
            return refusal("concurrency", limits.concurrency, 1)
        if limits.rpm:
            used = self.requests.get((key_id, window), 0)
            if used >= limits.rpm:
                return refusal("rpm", limits.rpm, _retry_after(now))
            self._trim(window)
            self.requests[(key_id, window)] = used + 1
        if limits.concurrency:
            self.active[key_id] = self.active.get(key_id, 0) + 1
        return None

    async def release(self, key_id: int, limits: KeyLimits) -> None:
        self.release_now(key_id, limits)

    async def settle(self, key_id: int, limits: KeyLimits, tokens: int, now: float, cost: int = 0) -> None:
        self.settle_now(key_id, limits, tokens, now, cost)

    def finish_later(self, key_id: int, limits: KeyLimits, tokens: int, now: float, cost: int = 0) -> None:
        """The end of a request (as ``RedisLimiter.finish_later``): in memory there is nothing to
        wait for, so the slot is freed and the usage settled at once."""
        self.release_now(key_id, limits)
        self.settle_now(key_id, limits, tokens, now, cost)

    async def drain(self) -> None:
        """Nothing is ever pending in memory (the Redis limiter's shutdown counterpart)."""

    async def aclose(self) -> None:
        """Nothing to close (the Redis limiter's counterpart)."""

    def release_now(self, key_id: int, limits: KeyLimits) -> None:
        if limits.concurrency:
            self.active[key_id] = max(0, self.active.get(key_id, 0) - 1)

    def settle_now(self, key_id: int, limits: KeyLimits, tokens: int, now: float, cost: int = 0) -> None:
        if limits.tpm and tokens:
            window = int(now // WINDOW)
            self.tokens[(key_id, window)] = self.tokens.get((key_id, window), 0) + tokens
        if limits.spends and cost:
            day = utc_day(now)
            self._spent(key_id, limits, day)
            self.spent[(key_id, day)] += cost
            self.spent[(key_id, "total")] += cost

    def _trim(self, window: int) -> None:
        if len(self.requests) > 4096:  # old windows of many keys: drop everything before this one
            for table in (self.requests, self.tokens):
                for k in [k for k in table if k[1] < window]:
                    del table[k]


class RedisLimiter:
    """Counts in Redis, shared by every worker and instance; falls back to ``LocalLimiter``
    while Redis cannot be reached (a client error is never caused by Redis being down).

    A request costs one Redis round trip, overlapped with its own decoding and preparation
    (``begin``/``admission.Admission``): the admission script (``EVALSHA``; the source is sent
    only when Redis answers that it does not know the script). Freeing the concurrency slot and
    settling tokens and spend is a second script call made after the response's last byte
    (``finish_later``), so the client never waits for it; it usually shares the next
    admission's write. Both go over the limiter's own connection (``redis_pipe``) when the
    redis-py client's connection can be mirrored (TCP or Unix socket), else through redis-py."""

    def __init__(self, redis: Any, prefix: str = "gw:limits") -> None:
        redis_errors.load()  # redis-py's exceptions, imported with the first Redis limiter only
        self.redis = redis
        self.pipe = RedisPipe.of(redis)  # the scripts' own connection (None: through redis-py)
        self.prefix = prefix
        self.local = LocalLimiter()
        self.down_until = 0.0
        self.pending: set[asyncio.Future[Any]] = set()  # finish calls in flight (kept from the GC)
        self.finish_failures = 0  # end-of-request calls that Redis did not take (settled locally)
        self.commands: dict[tuple[int, int], tuple[KeyLimits, bytes]] = {}  # _admit_command
        self.prefixes: dict[tuple[int, int], bytes] = {}  # _finish_prefix

    def _keys(self, key_id: int, now: float) -> list[str]:
        window = int(now // WINDOW)
        return [
            f"{self.prefix}:{key_id}:r:{window}",
            f"{self.prefix}:{key_id}:t:{window}",
            f"{self.prefix}:{key_id}:active",
            f"{self.prefix}:{key_id}:spend:{utc_day(now)}",
            f"{self.prefix}:{key_id}:spend:total",
        ]

    def _failed(self, exc: BaseException) -> None:
        if time.monotonic() >= self.down_until:
            log.warning("limits: Redis unreachable (%s); counting per worker for 5 s", type(exc).__name__)
        self.down_until = time.monotonic() + 5.0

    async def _script(self, sha: str, source: str, args: tuple[Any, ...]) -> Any:
        """One ``EVALSHA`` (``args``: the key count, keys, then arguments), on the pipe when
        there is one; a Redis that lost its scripts (restart, ``SCRIPT FLUSH``) is sent the
        source once and asked again."""
        pipe = self.pipe
        if pipe is not None:
            reloaded = reconnected = False
            while True:
                try:
                    return await pipe.call("EVALSHA", sha, *args)
                except redis_errors.NoScriptError:
                    if reloaded:
                        raise
                    reloaded = True
                    await pipe.call("SCRIPT", "LOAD", source)
                except redis_errors.RedisConnectionError:  # dropped (restart, idle timeout): reconnect once
                    if reconnected:
                        raise
                    reconnected = True
        try:
            return await self.redis.evalsha(sha, *args)
        except redis_errors.NoScriptError:
            await self.redis.script_load(source)
            return await self.redis.evalsha(sha, *args)

    def _admit_args(self, key_id: int, limits: KeyLimits, now: float) -> tuple[Any, ...]:
        """``EVALSHA`` arguments of the admission script after the sha."""
        day_base = limits.spent_today if limits.spent_day == utc_day(now) else 0
        return (
            5,
            *self._keys(key_id, now),
            limits.rpm or 0,
            limits.tpm or 0,
            limits.concurrency or 0,
            WINDOW + 5,
            CONCURRENCY_TTL,
            limits.daily_spend or 0,
            limits.total_spend or 0,
            day_base,
            limits.spent_total,
        )

    def _admit_command(self, key_id: int, limits: KeyLimits, now: float) -> bytes:
        """The admission's ``EVALSHA`` in RESP, kept per key and minute: the same bytes for every
        request of a key in a window (the UTC day changes on a window boundary), rebuilt when the
        key's limits change (a new snapshot: another ``KeyLimits`` object)."""
        window = int(now // WINDOW)
        kept = self.commands.get((key_id, window))
        if kept is not None and kept[0] is limits:
            return kept[1]
        if len(self.commands) > 4096:
            self.commands.clear()
        data = encode(("EVALSHA", ADMIT_SHA, *self._admit_args(key_id, limits, now)))
        self.commands[(key_id, window)] = (limits, data)
        return data

    async def admit(self, key_id: int, limits: KeyLimits, now: float) -> ClientError | None:
        if time.monotonic() < self.down_until:
            return self.local.admit_now(key_id, limits, now)
        try:
            reply = await self._script(ADMIT_SHA, ADMIT_LUA, self._admit_args(key_id, limits, now))
        except Exception as exc:  # Redis down or slow: never fail the client for it
            self._failed(exc)
            return self.local.admit_now(key_id, limits, now)
        return self.verdict(reply, limits, now)

    def begin(self, key_id: int, limits: KeyLimits, now: float) -> Admission:
        """Start the admission and return at once: with the pipe connected, the script call is
        written to Redis now and its reply read when the request first awaits the verdict
        (after decoding, before anything goes upstream). Otherwise (the first request, Redis
        down, a client the pipe cannot mirror) the usual ``admit`` runs as a task."""
        if time.monotonic() < self.down_until:
            return Admission(self, key_id, limits, now, verdict=self.local.admit_now(key_id, limits, now))
        adm = Admission(self, key_id, limits, now)
        pipe = self.pipe
        if pipe is not None and pipe.ready:
            adm.reply = pipe.send_encoded(self._admit_command(key_id, limits, now))
        else:
            adm.task = asyncio.get_running_loop().create_task(self.admit(key_id, limits, now))
        return adm

    def verdict(self, reply: Any, limits: KeyLimits, now: float) -> ClientError | None:
        """The admission script's reply as the client's answer: None when admitted."""
        kind, seconds = reply
        if not kind:
            return None
        name = KINDS[int(kind)]
        limit = getattr(limits, name)
        if name in ("daily_spend", "total_spend"):
            return refusal(name, limit, _until_midnight(now))
        wait = _retry_after(now) if name != "concurrency" else 1
        return refusal(name, limit, max(1, min(wait, int(seconds) if int(seconds) > 0 else wait)))

    async def release(self, key_id: int, limits: KeyLimits) -> None:
        await self.finish(key_id, limits, 0, time.time())

    async def settle(self, key_id: int, limits: KeyLimits, tokens: int, now: float, cost: int = 0) -> None:
        await self.finish(key_id, limits, tokens, now, cost, release=False)

    def finish_later(self, key_id: int, limits: KeyLimits, tokens: int, now: float, cost: int = 0) -> None:
        """The end of a request, once its answer is sent; neither this client nor the
        connection's next request waits for Redis. With the pipe connected, the script call is
        held briefly to share the next admission's write (``RedisPipe.send_later``); otherwise
        ``finish`` runs as a task."""
        pipe = self.pipe
        if pipe is not None and pipe.ready and time.monotonic() >= self.down_until:
            release = bool(limits.concurrency)
            settled = tokens if limits.tpm else 0
            day, total = (cost if limits.daily_spend else 0), (cost if limits.total_spend else 0)
            if not (release or settled or day or total):
                return
            data = self._finish_prefix(key_id, now) + encode_ints(
                (int(release), settled, WINDOW + 5, day, total)
            )
            self._send_finish(pipe.send_later(data), data, (key_id, limits, tokens, now, cost))
            return
        task = asyncio.get_running_loop().create_task(self.finish(key_id, limits, tokens, now, cost))
        self.pending.add(task)
        task.add_done_callback(self.pending.discard)

    def _finish_prefix(self, key_id: int, now: float) -> bytes:
        """The finish script call up to its integer arguments, kept per key and minute."""
        window = int(now // WINDOW)
        kept = self.prefixes.get((key_id, window))
        if kept is None:
            if len(self.prefixes) > 4096:
                self.prefixes.clear()
            head = ("EVALSHA", FINISH_SHA, 4, *self._keys(key_id, now)[1:])
            kept = encode(head, count=len(head) + 5)  # the five integers follow (``encode_ints``)
            self.prefixes[(key_id, window)] = kept
        return kept

    def _send_finish(
        self, reply: asyncio.Future[Any], data: bytes, end: tuple[Any, ...], first: bool = True
    ) -> None:
        """Wait for a finish written on the pipe (``end``: ``finish``'s arguments)."""
        self.pending.add(reply)
        reply.add_done_callback(lambda done: self._finished(done, data, end, first))

    def _finished(self, done: asyncio.Future[Any], data: bytes, end: tuple[Any, ...], first: bool) -> None:
        """The reply to a held finish: as ``finish`` handles its own. NOSCRIPT (the scripts
        flushed): the source and the call are written again at once, from this callback, so they
        precede the next admission's retry (a task, run after this callback), which shared the
        refused write; a retry that overtook the finish would find a one-slot key's slot still
        taken and refuse the request."""
        self.pending.discard(done)
        exc = None if done.cancelled() else done.exception()
        pipe = self.pipe
        if first and isinstance(exc, redis_errors.NoScriptError) and pipe is not None and pipe.ready:
            pipe.send("SCRIPT", "LOAD", FINISH_LUA).add_done_callback(_retrieved)  # its error: the call's
            self._send_finish(pipe.send_encoded(data), data, end, first=False)
            return
        key_id, limits, tokens, now, cost = end
        # ``finish`` loads the script or reconnects
        if isinstance(exc, redis_errors.NoScriptError | redis_errors.RedisConnectionError):
            task = asyncio.get_running_loop().create_task(self.finish(key_id, limits, tokens, now, cost))
            self.pending.add(task)
            task.add_done_callback(self.pending.discard)
            return
        if exc is not None or done.cancelled():
            self.finish_failures += 1
            self._failed(exc or asyncio.CancelledError())
            self.local.settle_now(key_id, limits, tokens, now, cost)
        if limits.concurrency:
            self.local.release_now(key_id, limits)

    def _finish_args(
        self, key_id: int, limits: KeyLimits, tokens: int, now: float, cost: int, release: bool = True
    ) -> tuple[Any, ...] | None:
        """``EVALSHA`` arguments of the finish script after the sha; None when it has nothing to do."""
        release = release and bool(limits.concurrency)
        tokens = tokens if limits.tpm else 0
        day, total = (cost if limits.daily_spend else 0), (cost if limits.total_spend else 0)
        if not (release or tokens or day or total):
            return None
        keys = self._keys(key_id, now)
        return (4, *keys[1:], int(release), tokens, WINDOW + 5, day, total)

    async def drain(self, timeout: float = 2.0) -> None:
        """At shutdown: let the end-of-request calls still in flight reach Redis. Until nothing
        is pending (or ``timeout``): an admission still in flight queues its finish when its
        reply comes, and a finish answered NOSCRIPT (the scripts flushed meanwhile) is sent
        again as a new call."""
        deadline = asyncio.get_running_loop().time() + timeout
        while self.pending:
            if self.pipe is not None:
                self.pipe.flush()  # a finish held for company goes now
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                return
            await asyncio.wait(set(self.pending), timeout=left)

    async def aclose(self) -> None:
        """At shutdown, after ``drain``: close the scripts' connection (not the redis-py client,
        which the caller owns)."""
        if self.pipe is not None:
            self.pipe.close()

    async def finish(
        self, key_id: int, limits: KeyLimits, tokens: int, now: float, cost: int = 0, *, release: bool = True
    ) -> None:
        """Free the concurrency slot (``release``) and settle tokens and spend in one script call.
        Never raises: without Redis the usage is settled in this worker's counters (logged and
        counted in ``finish_failures``)."""
        args = self._finish_args(key_id, limits, tokens, now, cost, release)
        if args is None:
            return
        try:
            await self._script(FINISH_SHA, FINISH_LUA, args)
        except Exception as exc:  # Redis down, slow, or anything else: the client has its answer
            self.finish_failures += 1
            self._failed(exc)
            self.local.settle_now(key_id, limits, tokens, now, cost)
        if release and limits.concurrency:
            self.local.release_now(key_id, limits)


Limiter = LocalLimiter | RedisLimiter


def _retrieved(done: asyncio.Future[Any]) -> None:
    """A reply nobody reads (its failure shows in the next call's): retrieved, so asyncio does
    not log it as never retrieved."""
    if not done.cancelled():
        done.exception()
