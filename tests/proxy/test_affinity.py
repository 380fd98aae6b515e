"""Sticky routing (gateway/proxy/affinity.py): the binding key, the bounded local table, the plan
reordering by mode, clearing versus skipping, and the routing loop through the ASGI app."""

from __future__ import annotations

import asyncio
import dataclasses
from types import SimpleNamespace

from gateway.proxy.affinity import AffinityStore, Binding, binding_key, choose, explicit_id, reorder, served
from gateway.proxy.breaker import BreakerBoard
from gateway.proxy.routing import candidates
from gateway.urp import Request, TextNode, ToolCallNode
from tests.proxy.helpers import channel, provider, snapshot


def conv(opening: str, *turns: str, system: str = "S") -> Request:
    nodes = [TextNode(role="system", content=system), TextNode(role="user", content=opening)]
    for i, t in enumerate(turns):
        nodes += [TextNode(role="assistant", content=f"a{i}"), TextNode(role="user", content=t)]
    return Request(model="m", input=nodes)


def test_key_stable_across_turns_and_distinct_per_conversation_tenant_model():
    k = binding_key(1, "m", conv("hello"))
    assert k == binding_key(1, "m", conv("hello", "more", "and more"))
    assert k != binding_key(1, "m", conv("other opening"))
    assert k != binding_key(2, "m", conv("hello")) and k != binding_key(1, "m2", conv("hello"))
    assert len(k) == 32 and "hello" not in k
    assert binding_key(1, "m", Request(model="m")) is None


def test_key_is_deterministic_across_processes():
    """A fixed value: a per-process seed (like ``hash()``) would break bindings shared in Redis."""
    assert binding_key(7, "m", conv("fixed")) == "6e3371d0656d1d179da2b935a4c137a3"


def test_opening_is_bounded():
    long_system = [TextNode(role="system", content=f"s{i}") for i in range(20)]
    a = Request(model="m", input=[*long_system, TextNode(role="user", content="x")])
    b = Request(model="m", input=[*long_system, TextNode(role="user", content="y")])
    assert binding_key(1, "m", a) == binding_key(1, "m", b), "only the first 8 nodes count"
    big = "z" * 20000
    a = Request(model="m", input=[TextNode(role="system", content=big + "1")])
    b = Request(model="m", input=[TextNode(role="system", content=big + "2")])
    assert binding_key(1, "m", a) == binding_key(1, "m", b), "only the first 16 KiB count"
    c = Request(model="m", input=[ToolCallNode(call_id="1", name="f"), TextNode(role="user", content="q")])
    assert binding_key(1, "m", c) is not None


def test_explicit_ids_take_precedence():
    req = conv("hello")
    req.extra = {"previous_response_id": "resp_1", "session_id": "s"}
    assert explicit_id(req) == "previous_response_id:resp_1"
    req.extra = {"metadata": {"conversation_id": "c9"}}
    assert explicit_id(req) == "conversation_id:c9"
    req.extra = {"conversation": {"id": "conv_1"}}
    assert explicit_id(req) == "conversation:conv_1"
    req.extra = {}
    req.user = "u1"
    assert explicit_id(req) == "user:u1"
    other = conv("a different opening")
    other.user = "u1"
    assert binding_key(1, "m", req) == binding_key(1, "m", other), "an explicit id wins over the opening"


def test_local_table_is_lru_bounded_with_idle_expiry():
    now = [1000.0]
    store = AffinityStore(None, max_local=3, idle_ttl=10, clock=lambda: now[0])
    for i in range(4):
        store.put(f"k{i}", Binding(1, i, now[0]))
    assert asyncio.run(store.get("k0")) is None and asyncio.run(store.get("k3")) == Binding(1, 3, 1000.0)
    now[0] += 11
    assert asyncio.run(store.get("k3")) is None


def sticky(p):
    return dataclasses.replace(p, affinity_mode="sticky")


def two_providers(mode="sticky", prio_b=0, failback=300.0):
    a = dataclasses.replace(
        provider(1, [channel(11, base_url="http://a", models={"m": "m"}, provider_id=1)]), affinity_mode=mode
    )
    b = dataclasses.replace(
        provider(
            2,
            [
                channel(21, base_url="http://b", models={"m": "m"}, provider_id=2),
                channel(22, base_url="http://b2", models={"m": "m"}, provider_id=2),
            ],
            priority=prio_b,
        ),
        affinity_mode=mode,
        affinity_failback=failback,
    )
    return snapshot([a, b])


def ids(plan):
    return [ch.id for _, chans in plan for ch, _ in chans]


def test_reorder_puts_bound_channel_first():
    snap = two_providers()
    plan = candidates(snap, "m", BreakerBoard())
    new, outcome = reorder(plan, snap.routes["m"], Binding(2, 22, 0.0), 10.0)
    assert outcome == "hit" and ids(new)[0] == 22 and sorted(ids(new)) == [11, 21, 22]


def test_unhealthy_target_skipped_not_forgotten_and_gone_target_cleared():
    snap = two_providers()
    board = BreakerBoard()
    for _ in range(3):
        board.record_failure(22)
    plan = candidates(snap, "m", board)
    assert reorder(plan, snap.routes["m"], Binding(2, 22, 0.0), 10.0)[1] == "skipped"
    assert reorder(plan, snap.routes["m"], Binding(2, 99, 0.0), 10.0)[1] == "gone"
    assert reorder(plan, snap.routes["m"], Binding(9, 11, 0.0), 10.0)[1] == "gone"
    store = AffinityStore(None)
    _, decision = asyncio.run(choose(store, snap, 1, "m", conv("x"), plan))
    served(store, decision, att(snap.routes["m"][1].provider, 22))
    _, decision = asyncio.run(choose(store, snap, 1, "m", conv("x"), plan))
    assert decision.outcome == "skipped"
    served(store, decision, att(snap.routes["m"][0].provider, 11))
    assert asyncio.run(store.get(decision.key)) == decision.binding, "not forgotten while unhealthy"


def test_prefer_higher_priority_fails_back_after_the_delay():
    snap = two_providers("prefer_higher_priority", prio_b=5, failback=300)
    plan = candidates(snap, "m", BreakerBoard())
    assert ids(plan)[0] == 11
    new, outcome = reorder(plan, snap.routes["m"], Binding(2, 21, 1000.0), 1100.0)
    assert outcome == "hit" and ids(new)[0] == 21
    new, outcome = reorder(plan, snap.routes["m"], Binding(2, 21, 1000.0), 1300.0)
    assert outcome == "failback" and ids(new)[0] == 11
    snap = two_providers("sticky", prio_b=5)
    plan = candidates(snap, "m", BreakerBoard())
    assert ids(reorder(plan, snap.routes["m"], Binding(2, 21, 0.0), 1e9)[0])[0] == 21


def att(
    provider,
    channel_id: int,
    *,
    completed: bool = True,
    response_id: str | None = None,
    protocol: str = "chat_completion",
):
    """What ``served`` reads from an attempt."""
    return SimpleNamespace(
        provider=provider,
        channel=SimpleNamespace(id=channel_id, protocol=protocol),
        completed=completed,
        response_id=response_id,
    )


def test_choose_and_served_cycle_and_off_costs_nothing():
    snap = two_providers()
    store = AffinityStore(None)
    req = conv("hello")
    plan = candidates(snap, "m", BreakerBoard())
    plan1, decision = asyncio.run(choose(store, snap, 1, "m", req, plan))
    assert decision is not None and decision.binding is None and not decision.hit
    served(store, decision, att(snap.routes["m"][1].provider, 22, completed=False))
    assert store.local == {}, "a stream that did not end cleanly binds nothing"
    served(store, decision, att(snap.routes["m"][1].provider, 22))
    plan2, decision2 = asyncio.run(choose(store, snap, 1, "m", conv("hello", "again"), plan))
    assert decision2.hit and ids(plan2)[0] == 22
    assert decision2.as_capture(2, 22) == {"hit": True, "key": decision2.key[:12]}
    assert decision2.as_capture(1, 11)["hit"] is False

    off = two_providers("off")
    plan = candidates(off, "m", BreakerBoard())
    assert asyncio.run(choose(store, off, 1, "m", req, plan)) == (plan, None)


def test_binding_cleared_when_channel_no_longer_serves_model():
    snap = two_providers()
    store = AffinityStore(None)
    plan = candidates(snap, "m", BreakerBoard())
    _, decision = asyncio.run(choose(store, snap, 1, "m", conv("x"), plan))
    served(store, decision, att(snap.routes["m"][1].provider, 22))
    a = sticky(provider(1, [channel(11, base_url="http://a", models={"m": "m"}, provider_id=1)]))
    b = sticky(
        provider(
            2,
            [
                channel(21, base_url="http://b", models={"m": "m"}, provider_id=2),
                channel(22, base_url="http://b2", models={"other": "m"}, provider_id=2),
            ],
        )
    )
    changed = snapshot([a, b])
    plan = candidates(changed, "m", BreakerBoard())
    _, decision = asyncio.run(choose(store, changed, 1, "m", conv("x"), plan))
    assert decision.binding is None and store.local == {}


def test_responses_answer_binds_its_id_for_the_next_previous_response_id():
    snap = two_providers()
    store = AffinityStore(None)
    plan = candidates(snap, "m", BreakerBoard())
    _, decision = asyncio.run(choose(store, snap, 1, "m", conv("start"), plan))
    served(
        store,
        decision,
        att(snap.routes["m"][1].provider, 21, response_id="resp_9", protocol="responses"),
        responses_state=True,
    )
    follow = Request(
        model="m", input=[TextNode(role="user", content="next")], extra={"previous_response_id": "resp_9"}
    )
    plan2, decision2 = asyncio.run(choose(store, snap, 1, "m", follow, plan))
    assert decision2.hit and ids(plan2)[0] == 21


def test_redis_bindings_are_shared_expire_and_stay_bounded():
    import pytest as _pytest

    from tests.e2e.test_harness import REDIS_URL, redis_or_skip

    redis_or_skip()

    async def scenario():
        import redis.asyncio as aioredis

        probe = aioredis.Redis.from_url(REDIS_URL)
        await probe.delete(
            "gateway:affinity-index", *[k async for k in probe.scan_iter("gateway:affinity:*")] or ["x"]
        )
        a = AffinityStore(REDIS_URL, max_redis=3)
        b = AffinityStore(REDIS_URL, max_redis=3)
        try:
            for i in range(5):
                a.put(f"k{i}", Binding(1, i, 1.0))
                await asyncio.gather(*a._tasks)
            assert await b.get("k4") == Binding(1, 4, 1.0), "another worker sees the binding"
            assert 0 < await probe.ttl("gateway:affinity:k4") <= 1800
            await a.trim()
            assert await b.get("k0") is None and await probe.zcard("gateway:affinity-index") == 3
            a.clear("k4")
            await asyncio.gather(*a._tasks)
            assert await b.get("k4") is None
        finally:
            await a.close()
            await b.close()
            await probe.aclose()

    try:
        asyncio.run(scenario())
    except OSError as exc:  # pragma: no cover - Redis went away mid-test
        _pytest.skip(str(exc))
