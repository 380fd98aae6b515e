"""Per-key limits in the core: windows, concurrency, token settling, the Redis limiter against a
real Redis (shared by two limiters standing for two workers), and the client-IP rules."""

from __future__ import annotations

import ipaddress
import os

import pytest

from gateway.proxy.limits import (
    KeyLimits,
    LocalLimiter,
    RedisLimiter,
    client_ip,
    forwarded_client,
    ip_allowed,
    parse_limits,
)

REDIS_URL = os.environ.get("REDIS_URL_FOR_TESTS", "redis://127.0.0.1:6379/15")
T0 = 1_800_000_000.0  # the start of a minute window (divisible by 60)


@pytest.fixture(params=["local", "redis"])
async def limiters(request):
    """Two limiters standing for two workers: one shared in-process limiter, or two Redis
    limiters on their own connections sharing the counters."""
    if request.param == "local":
        shared = LocalLimiter()
        yield [shared, shared]
        return
    import redis.asyncio as aioredis

    clients = [aioredis.from_url(REDIS_URL, socket_connect_timeout=1) for _ in range(2)]
    try:
        await clients[0].ping()
    except Exception:
        if os.environ.get("GATEWAY_REQUIRE_SERVICES") == "1":
            raise
        pytest.skip("Redis is not reachable")
    prefix = f"gw:limits:test:{os.getpid()}"
    yield [RedisLimiter(c, prefix=prefix) for c in clients]
    keys = [k async for k in clients[0].scan_iter(f"{prefix}:*")]
    if keys:
        await clients[0].delete(*keys)
    for c in clients:
        await c.aclose()


async def test_rpm_admits_exactly_the_limit_per_window_across_workers(limiters):
    a, b = limiters
    limits = KeyLimits(rpm=5)
    results = [await (a if i % 2 else b).admit(7, limits, T0 + i) for i in range(8)]
    assert [r is None for r in results] == [True] * 5 + [False] * 3
    refused = results[-1]
    assert refused.status == 429 and refused.code == "rate_limit_exceeded"
    assert dict(refused.headers)[b"retry-after"] == b"53"  # until the window's end
    assert await a.admit(7, limits, T0 + 60) is None  # a new window


async def test_concurrency_is_freed_on_release(limiters):
    a, b = limiters
    limits = KeyLimits(concurrency=2)
    assert await a.admit(1, limits, T0) is None
    assert await b.admit(1, limits, T0) is None
    assert (await a.admit(1, limits, T0)).code == "rate_limit_exceeded"
    await b.release(1, limits)
    assert await a.admit(1, limits, T0) is None


async def test_tokens_settle_after_the_response(limiters):
    a, b = limiters
    limits = KeyLimits(tpm=100)
    assert await a.admit(3, limits, T0) is None
    await a.settle(3, limits, 60, T0 + 1)
    assert await b.admit(3, limits, T0 + 2) is None  # 60 of 100 used
    await b.settle(3, limits, 45, T0 + 3)
    refused = await a.admit(3, limits, T0 + 4)
    assert refused is not None and "tokens per minute" in refused.message
    assert await a.admit(3, limits, T0 + 61) is None


async def test_a_redis_that_lost_its_scripts_still_counts(limiters):
    """Admission and settlement are EVALSHA calls: a Redis restarted or flushed of its scripts is
    sent the source again, and the counts go on."""
    a, b = limiters
    limits = KeyLimits(rpm=2, tpm=100)
    assert await a.admit(11, limits, T0) is None
    if isinstance(a, RedisLimiter):
        await a.redis.script_flush()
    await a.settle(11, limits, 100, T0)
    refused = await b.admit(11, limits, T0 + 1)
    assert refused is not None and "tokens per minute" in refused.message


async def test_redis_down_falls_back_to_counting_in_the_worker():
    import redis.asyncio as aioredis

    dead = RedisLimiter(aioredis.from_url("redis://127.0.0.1:1/0", socket_connect_timeout=0.2))
    limits = KeyLimits(rpm=1)
    assert await dead.admit(1, limits, T0) is None
    assert (await dead.admit(1, limits, T0)).status == 429


def test_parse_limits_and_allow_list():
    assert parse_limits(None, None) is None
    assert parse_limits({}, []) is None
    limits = parse_limits({"rpm": 60}, ["10.0.0.0/8", "2001:db8::/32"])
    assert limits.rpm == 60 and limits.counted
    assert ip_allowed(limits, "10.1.2.3") and ip_allowed(limits, "::ffff:10.9.9.9")
    assert ip_allowed(limits, "2001:db8::1")
    assert not ip_allowed(limits, "127.0.0.1") and not ip_allowed(limits, "garbage")
    only_ip = parse_limits(None, ["127.0.0.1"])
    assert only_ip is not None and not only_ip.counted


def test_client_ip_believes_forwarded_for_only_from_trusted_proxies():
    trusted = (ipaddress.ip_network("127.0.0.0/8"),)
    headers = {"x-forwarded-for": "203.0.113.9, 10.0.0.2"}
    assert client_ip({"client": ("127.0.0.1", 5)}, headers, trusted) == "10.0.0.2"
    assert (
        client_ip({"client": ("127.0.0.1", 5)}, headers, (*trusted, ipaddress.ip_network("10.0.0.0/8")))
        == "203.0.113.9"
    )
    assert client_ip({"client": ("198.51.100.7", 5)}, headers, trusted) == "198.51.100.7"  # spoof ignored
    assert client_ip({"client": ("127.0.0.1", 5)}, {}, ()) == "127.0.0.1"
    assert client_ip({"client": ("127.0.0.1", 5)}, {"x-real-ip": "10.4.4.4"}, trusted) == "10.4.4.4"


@pytest.mark.parametrize(
    ("forwarded", "client"),
    [
        ("203.0.113.5:5678", "203.0.113.5"),  # some balancers append the port
        ("[2001:db8::1]:443", "2001:db8::1"),
        ("[2001:db8::1]", "2001:db8::1"),
        ("2001:db8::1", "2001:db8::1"),
        ("::ffff:203.0.113.5", "203.0.113.5"),
        ("203.0.113.5, , 127.0.0.1", "203.0.113.5"),  # empty entries and trusted hops skipped
        ("unknown", ""),  # names nobody: matches no allow-list, stored as no address
        ("203.0.113.5, garbage", ""),  # the client's place holds no address: not the hop before it
        ("garbage, 203.0.113.5", "203.0.113.5"),  # what a client wrote before the proxy's entry
    ],
)
def test_a_forwarded_hop_is_read_as_an_address_or_names_nobody(forwarded, client):
    trusted = (ipaddress.ip_network("127.0.0.0/8"),)
    assert client_ip({"client": ("127.0.0.1", 5)}, {"x-forwarded-for": forwarded}, trusted) == client
    limits = parse_limits(None, ["0.0.0.0/0", "::/0"])
    assert ip_allowed(limits, client) == bool(client)


def test_a_peers_trust_is_judged_against_the_networks_asked_about():
    """The per-peer answer is remembered, but never across different trusted networks (a
    reconfigured gateway, or ``/metrics`` and the proxy with their own tuples)."""
    loopback = (ipaddress.ip_network("127.0.0.0/8"),)
    other = (ipaddress.ip_network("10.0.0.0/8"),)
    headers = {"x-forwarded-for": "203.0.113.9"}
    scope = {"client": ("127.0.0.1", 5)}
    for _ in range(2):
        assert client_ip(scope, headers, loopback) == "203.0.113.9"
        assert client_ip(scope, headers, other) == "127.0.0.1"
    assert forwarded_client("127.0.0.1", "203.0.113.9", loopback) == "203.0.113.9"
    assert forwarded_client("127.0.0.1", "203.0.113.9", ()) == "127.0.0.1"  # empty trusts nobody


async def test_spend_caps_start_from_the_logs_and_settle_with_costs(limiters):
    from gateway.proxy.limits import utc_day

    a, b = limiters
    day = utc_day(T0)
    limits = KeyLimits(
        daily_spend=1_000, total_spend=5_000, spent_day=day, spent_today=400, spent_total=4_000
    )
    assert await a.admit(9, limits, T0) is None
    await a.settle(9, limits, 0, T0, cost=600)  # today 1000: the daily cap is reached
    refused = await b.admit(9, limits, T0 + 1)
    assert refused.status == 402 and refused.code == "api_key_daily_limit_reached"
    assert int(dict(refused.headers)[b"retry-after"]) > 0
    tomorrow = T0 + 86400
    assert await b.admit(9, limits, tomorrow) is None  # a new UTC day; the logs' base was for yesterday
    await b.settle(9, limits, 0, tomorrow, cost=400)  # total 5000
    refused = await a.admit(9, limits, tomorrow + 1)
    assert refused.status == 402 and refused.code == "api_key_spend_limit_reached"


def test_spend_caps_parse_from_usd():
    limits = parse_limits({"daily_spend": "5.00", "total_spend": "0.000000002"}, None)
    assert limits.daily_spend == 5_000_000_000 and limits.total_spend == 2 and limits.counted


async def test_the_answer_does_not_wait_for_redis_to_settle():
    """A limited request's answer, and the app call itself, are over while Redis still holds back
    the end of the request (its writes paused from the moment the upstream is reached): freeing
    the concurrency slot and settling the tokens happen after, and land once Redis resumes."""
    import asyncio
    import dataclasses
    import time

    import redis.asyncio as aioredis

    from gateway.crypto import hash_api_key
    from gateway.wiring import build_proxy_app

    from .helpers import SECRET, FakeUpstream, call, channel, key, provider, snapshot

    admin = aioredis.from_url(REDIS_URL, socket_connect_timeout=1)
    try:
        await admin.ping()
    except Exception:
        if os.environ.get("GATEWAY_REQUIRE_SERVICES") == "1":
            raise
        pytest.skip("Redis is not reachable")

    class PausingUpstream(FakeUpstream):
        async def handle(self, request):
            await admin.client_pause(1500, all=False)  # writes wait from here (admission is done)
            return await super().handle(request)

    up = PausingUpstream()
    await up.start()
    app = build_proxy_app()
    prefix = f"gw:limits:test:{os.getpid()}:late"
    limiter = RedisLimiter(aioredis.from_url(REDIS_URL, socket_timeout=10), prefix=prefix)
    app.runtime.limiter = limiter
    limited = dataclasses.replace(key(), limits=KeyLimits(tpm=10**9, concurrency=4))
    chan = channel(1, base_url=f"{up.base}/ok/v1", models={"m": "up-m"})
    app.holder.set(snapshot([provider(1, [chan])], {hash_api_key(SECRET): limited}))
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    try:
        started = time.monotonic()
        reply = await call(app, "POST", "/v1/chat/completions", body)
        took = time.monotonic() - started
        assert reply.status == 200, reply.body
        assert took < 1.0  # the paused Redis was not waited for
        assert await admin.get(f"{prefix}:1:active") == b"1"  # not yet freed
        await asyncio.wait_for(limiter.drain(timeout=10), 10)
        assert int(await admin.get(f"{prefix}:1:active")) == 0
        window = int(time.time() // 60)
        settled = [await admin.get(f"{prefix}:1:t:{w}") for w in (window - 1, window)]
        assert sum(int(v or 0) for v in settled) == 5  # the upstream's usage
    finally:
        await admin.client_unpause()
        keys = [k async for k in admin.scan_iter(f"{prefix}:*")]
        if keys:
            await admin.delete(*keys)
        await app.client.close()
        await limiter.redis.aclose()
        await admin.aclose()
        await up.stop()
