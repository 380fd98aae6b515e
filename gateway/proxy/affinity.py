"""Sticky routing (affinity): send a conversation back to the provider and channel that served
it, so the upstream's prompt cache (and server-side state such as ``previous_response_id``) hits.

Binding key: the tenant (API key id), the logical model, and either an explicit stable id
(Responses ``previous_response_id``, then a conversation / session / thread id in the body or its
``metadata``, then the request's user id) or a hash of the conversation's opening: the leading
nodes up to and including the first user node, at most ``PREFIX_NODES`` nodes and
``PREFIX_BYTES`` bytes. Taking the opening (not "the first 8 nodes") keeps the key the same on
every turn of one conversation while two conversations with different openings differ. The key
is an xxHash3-128 digest: deterministic across restarts, and the raw material is never stored.

Value: (provider id, channel id, bound at). Idle expiry ``IDLE_TTL`` refreshed on every use.
With ``REDIS_URL`` the bindings live in Redis (``gateway:affinity:<digest>`` with a TTL, at most
``MAX_REDIS`` of them: an index sorted by last use is trimmed now and then), shared by every worker
and instance; reads fall back to the local table when Redis fails. Without it
they live in a per-process LRU of ``MAX_LOCAL`` entries.

Per provider ``affinity_mode``: ``off`` (never bound, no lookup cost), ``sticky`` (the bound
target stays first even after a higher-priority provider recovers) or ``prefer_higher_priority``
(once ``affinity_failback_seconds`` have passed since binding, normal priority order wins again
when an earlier provider is available). A binding is cleared when its target can no longer serve
the model (provider or channel gone or disabled, weight 0, model no longer mapped); a target that
is only unhealthy (open circuit) is skipped for this request and the binding kept.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gateway.urp import Request
from gateway.urp.canonical import canonical_json, jsonable, xxh3_128_hex

from .snapshot import ChannelSnap, Route, Snapshot

if TYPE_CHECKING:
    from .attempt import Attempt

log = logging.getLogger("gateway.proxy.affinity")

IDLE_TTL = 1800.0
MAX_LOCAL = 4096
PREFIX_NODES = 8
PREFIX_BYTES = 16384
REDIS_PREFIX = "gateway:affinity:"
REDIS_INDEX = "gateway:affinity-index"  # sorted set: binding key -> last use, to bound the count
MAX_REDIS = 100_000
TRIM_EVERY = 256
REDIS_TIMEOUT = 0.25
_EXPLICIT_FIELDS = ("conversation_id", "conversation", "session_id", "thread_id", "user_id")

Plan = list[tuple[Route, list[tuple[ChannelSnap, str]]]]


@dataclass(slots=True, frozen=True)
class Binding:
    provider_id: int
    channel_id: int
    bound_at: float


# -- the key ------------------------------------------------------------------------------------


def _id_value(value: Any) -> str | None:
    if isinstance(value, str) and value:
        return value
    if isinstance(value, dict) and isinstance(value.get("id"), str) and value["id"]:
        return value["id"]  # Responses ``conversation: {"id": ...}``
    return None


def explicit_id(req: Request) -> str | None:
    """The client's stable conversation id, if it sent one (never a per-request id)."""
    prev = _id_value(req.extra.get("previous_response_id"))
    if prev:
        return f"previous_response_id:{prev}"
    meta = req.extra.get("metadata")
    for source in (req.extra, meta if isinstance(meta, dict) else {}):
        for name in _EXPLICIT_FIELDS:
            value = _id_value(source.get(name))
            if value:
                return f"{name}:{value}"
    if req.user:
        return f"user:{req.user}"
    return None


def _opening(req: Request) -> bytes | None:
    parts: list[bytes] = []
    size = 0
    for node in req.input[:PREFIX_NODES]:
        raw = canonical_json(jsonable(node))
        parts.append(raw)
        size += len(raw)
        if size >= PREFIX_BYTES or getattr(node, "role", None) == "user":
            break
    if not parts:
        return None
    return b"".join(parts)[:PREFIX_BYTES]


def id_key(key_id: int, logical_model: str, explicit: str) -> str:
    return xxh3_128_hex(["id", key_id, logical_model, explicit])


def binding_key(key_id: int, logical_model: str, req: Request) -> str | None:
    """The digest naming this conversation's binding; None when there is nothing to key on."""
    explicit = explicit_id(req)
    if explicit is not None:
        return id_key(key_id, logical_model, explicit)
    opening = _opening(req)
    if opening is None:
        return None
    return xxh3_128_hex(["prefix", key_id, logical_model, xxh3_128_hex(opening.decode("utf-8", "replace"))])


# -- storage ------------------------------------------------------------------------------------


class AffinityStore:
    """Local LRU (always) plus an optional Redis mirror that is authoritative when reachable."""

    def __init__(
        self,
        redis_url: str | None = None,
        *,
        max_local: int = MAX_LOCAL,
        idle_ttl: float = IDLE_TTL,
        max_redis: int = MAX_REDIS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.local: OrderedDict[str, tuple[Binding, float]] = OrderedDict()  # key -> (binding, last used)
        self.max_local = max_local
        self.idle_ttl = idle_ttl
        self.clock = clock
        self.redis: Any = None
        self.max_redis = max_redis
        self._puts = 0
        self._tasks: set[asyncio.Task] = set()
        if redis_url:
            import redis.asyncio as aioredis

            self.redis = aioredis.Redis.from_url(redis_url, socket_timeout=1, socket_connect_timeout=1)

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        if self.redis is not None:
            try:
                await self.redis.aclose()
            except Exception:
                pass

    def _local_get(self, key: str) -> Binding | None:
        item = self.local.get(key)
        if item is None:
            return None
        binding, used = item
        if self.clock() - used > self.idle_ttl:
            del self.local[key]
            return None
        return binding

    def _local_put(self, key: str, binding: Binding) -> None:
        self.local[key] = (binding, self.clock())
        self.local.move_to_end(key)
        while len(self.local) > self.max_local:
            self.local.popitem(last=False)

    async def get(self, key: str) -> Binding | None:
        if self.redis is not None:
            try:
                raw = await asyncio.wait_for(self.redis.get(REDIS_PREFIX + key), REDIS_TIMEOUT)
            except Exception:
                log.debug("affinity lookup in Redis failed; using the local table", exc_info=True)
            else:
                if raw is None:
                    return None
                try:
                    pid, cid, bound = raw.decode().split(":")
                    return Binding(int(pid), int(cid), float(bound))
                except ValueError:
                    return None
        return self._local_get(key)

    def put(self, key: str, binding: Binding) -> None:
        """Bind (or refresh the idle expiry). The Redis write runs in the background."""
        self._local_put(key, binding)
        if self.redis is not None:
            self._puts += 1
            self._spawn(self._redis_put(key, binding, trim=self._puts % TRIM_EVERY == 1))

    async def _redis_put(self, key: str, binding: Binding, *, trim: bool) -> None:
        """SET with the idle TTL, and the key's last use in the index; now and then the index is
        trimmed to ``max_redis`` keys (oldest bindings deleted) and expired entries dropped."""
        value = f"{binding.provider_id}:{binding.channel_id}:{binding.bound_at}"
        now = self.clock()
        assert self.redis is not None
        pipe = self.redis.pipeline(transaction=False)
        pipe.set(REDIS_PREFIX + key, value, ex=max(1, int(self.idle_ttl)))
        pipe.zadd(REDIS_INDEX, {key: now})
        await pipe.execute()
        if trim:
            await self.trim(now)

    async def trim(self, now: float | None = None) -> None:
        now = self.clock() if now is None else now
        assert self.redis is not None
        await self.redis.zremrangebyscore(REDIS_INDEX, "-inf", now - self.idle_ttl)
        excess = await self.redis.zcard(REDIS_INDEX) - self.max_redis
        if excess > 0:
            oldest = await self.redis.zrange(REDIS_INDEX, 0, excess - 1)
            if oldest:
                await self.redis.delete(*(REDIS_PREFIX + k.decode() for k in oldest))
                await self.redis.zrem(REDIS_INDEX, *oldest)

    def clear(self, key: str) -> None:
        self.local.pop(key, None)
        if self.redis is not None:
            self._spawn(self.redis.delete(REDIS_PREFIX + key))

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        async def guarded() -> None:
            try:
                await coro
            except Exception as exc:  # Redis down: one line per binding, the local table holds
                log.warning(
                    "could not share an affinity binding through Redis (%s: %s)", type(exc).__name__, exc
                )

        try:
            task = asyncio.get_running_loop().create_task(guarded())
        except RuntimeError:  # no loop (unit tests)
            coro.close()
            return
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


# -- the decision ---------------------------------------------------------------------------------


@dataclass(slots=True)
class Decision:
    """What affinity did for one request; ``hit`` when the bound target was put first."""

    key: str
    binding: Binding | None
    tenant: int = 0
    logical_model: str = ""
    outcome: str = ""  # "" (no binding yet) or a reorder() outcome

    @property
    def hit(self) -> bool:
        return self.outcome == HIT

    def as_capture(self, provider_id: int, channel_id: int) -> dict[str, Any]:
        chose = (
            self.hit
            and self.binding is not None
            and (self.binding.provider_id, self.binding.channel_id) == (provider_id, channel_id)
        )
        return {"hit": chose, "key": self.key[:12]}


def _serves(routes: tuple[Route, ...], binding: Binding) -> bool:
    """Whether the bound channel can still serve the model at all (health aside)."""
    return any(
        route.provider.id == binding.provider_id
        and route.provider.affinity_mode != "off"
        and any(ch.id == binding.channel_id for ch, _ in route.channels)
        for route in routes
    )


HIT, SKIPPED, FAILBACK, GONE = "hit", "skipped", "failback", "gone"


def reorder(plan: Plan, routes: tuple[Route, ...], binding: Binding, now: float) -> tuple[Plan, str]:
    """The plan with the bound target first, and what happened: ``hit`` (target first),
    ``skipped`` (target only unhealthy: normal order, binding kept), ``failback``
    (prefer_higher_priority after the delay: normal order, the next success re-binds) or ``gone``
    (the target can no longer serve the model: the binding must be cleared)."""
    if not _serves(routes, binding):
        return plan, GONE
    index = next((i for i, (route, _) in enumerate(plan) if route.provider.id == binding.provider_id), None)
    if index is None:
        return plan, SKIPPED
    route, channels = plan[index]
    pos = next((i for i, (ch, _) in enumerate(channels) if ch.id == binding.channel_id), None)
    if pos is None:
        return plan, SKIPPED
    provider = route.provider
    if (
        provider.affinity_mode == "prefer_higher_priority"
        and index > 0
        and now - binding.bound_at >= provider.affinity_failback
        and any(r.provider.priority < provider.priority for r, _ in plan[:index])
    ):
        return plan, FAILBACK
    channels = [channels[pos], *channels[:pos], *channels[pos + 1 :]]
    return [(route, channels), *plan[:index], *plan[index + 1 :]], HIT


async def choose(
    store: AffinityStore | None,
    snapshot: Snapshot,
    key_id: int,
    logical_model: str,
    req: Request | None,
    plan: Plan,
) -> tuple[Plan, Decision | None]:
    """Look the conversation up and reorder ``plan``. No cost when no candidate provider has
    affinity on."""
    if store is None or req is None or not any(route.provider.affinity_mode != "off" for route, _ in plan):
        return plan, None
    key = binding_key(key_id, logical_model, req)
    if key is None:
        return plan, None
    binding = await store.get(key)
    decision = Decision(key=key, binding=binding, tenant=key_id, logical_model=logical_model)
    if binding is None:
        return plan, decision
    plan, decision.outcome = reorder(plan, snapshot.routes.get(logical_model, ()), binding, store.clock())
    if decision.outcome == GONE:
        store.clear(key)
        decision.binding = None
    return plan, decision


def served(
    store: AffinityStore | None, decision: Decision | None, att: Attempt, *, responses_state: bool = False
) -> None:
    """After an attempt answered the client: bind (or refresh) the conversation to what served
    it. Only a whole response or a stream that ended cleanly binds. A Responses-to-Responses
    answer also binds its response id, so the next ``previous_response_id`` comes back here."""
    if store is None or decision is None or att.provider.affinity_mode == "off" or not att.completed:
        return
    if decision.outcome == SKIPPED:
        return  # the bound target is only unhealthy: keep the binding for when it recovers
    provider, channel_id = att.provider, att.channel.id
    old = decision.binding
    if old is not None and (old.provider_id, old.channel_id) == (provider.id, channel_id):
        binding = old  # refresh the idle expiry, keep bound_at
    else:
        binding = Binding(provider.id, channel_id, store.clock())
    store.put(decision.key, binding)
    if responses_state and att.channel.protocol == "responses" and att.response_id:
        store.put(
            id_key(decision.tenant, decision.logical_model, f"previous_response_id:{att.response_id}"),
            binding,
        )
