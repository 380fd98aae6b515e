"""Per-key limits whose admission overlaps the request's own work (issue 17): the Redis round trip
runs while the body is decoded and the attempt built, yet a refused request still sends nothing
upstream and answers 429 in the client's shape, a request that fails to decode frees the slot its
admission took, and a request that ends before its admission's reply does not leak the slot."""

from __future__ import annotations

import dataclasses
import os
import time

import orjson
import pytest

from gateway.proxy.limits import KeyLimits, RedisLimiter
from gateway.proxy.usage_tap import UsageTap
from tests.minute_window import wait_for_fresh_minute

from .helpers import SECRET, call, channel, key, provider, snapshot

REDIS_URL = os.environ.get("REDIS_URL_FOR_TESTS", "redis://127.0.0.1:6379/15")
CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


@pytest.fixture
async def redis_limiter():
    import redis.asyncio as aioredis

    client = aioredis.from_url(REDIS_URL, socket_timeout=5, socket_connect_timeout=1)
    try:
        await client.ping()
    except Exception:
        if os.environ.get("GATEWAY_REQUIRE_SERVICES") == "1":
            raise
        pytest.skip("Redis is not reachable")
    prefix = f"gw:limits:test:{os.getpid()}:overlap"
    limiter = RedisLimiter(client, prefix=prefix)
    yield limiter
    await limiter.drain()
    await limiter.aclose()
    keys = [k async for k in client.scan_iter(f"{prefix}:*")]
    if keys:
        await client.delete(*keys)
    await client.aclose()


def _limited(app, upstream, limiter: RedisLimiter, limits: KeyLimits) -> None:
    from gateway.crypto import hash_api_key

    app.runtime.limiter = limiter
    chan = channel(1, base_url=f"{upstream.base}/ok/v1", models={"m": "up-m"})
    limited = dataclasses.replace(key(), limits=limits)
    app.holder.set(snapshot([provider(1, [chan])], {hash_api_key(SECRET): limited}))


async def _active(limiter: RedisLimiter) -> int:
    await limiter.drain()
    return int(await limiter.redis.get(f"{limiter.prefix}:1:active") or 0)


async def test_a_refused_request_sends_nothing_upstream(app, upstream, redis_limiter):
    wait_for_fresh_minute()
    _limited(app, upstream, redis_limiter, KeyLimits(rpm=1))
    first = await call(app, "POST", "/v1/chat/completions", CHAT)
    assert first.status == 200 and upstream.hits["ok"] == 1
    assert redis_limiter.pipe is not None and redis_limiter.pipe.ready  # the overlapping path

    streamed = await call(app, "POST", "/v1/chat/completions", {**CHAT, "stream": True})
    whole = await call(app, "POST", "/v1/chat/completions", CHAT)
    messages = await call(
        app, "POST", "/v1/messages", {"model": "m", "max_tokens": 5, "messages": CHAT["messages"]}
    )
    assert upstream.hits["ok"] == 1  # none of the refused requests reached the upstream
    for refused in (streamed, whole):
        assert refused.status == 429 and refused.headers["content-type"] == "application/json"
        assert int(refused.headers["retry-after"]) >= 1
        assert orjson.loads(refused.body)["error"]["code"] == "rate_limit_exceeded"
    assert messages.status == 429 and int(messages.headers["retry-after"]) >= 1
    body = orjson.loads(messages.body)
    assert body["type"] == "error" and body["error"]["type"] == "rate_limit_error"


async def test_a_refusal_is_the_answer_even_for_a_request_that_would_fail_to_decode(
    app, upstream, redis_limiter
):
    wait_for_fresh_minute()
    _limited(app, upstream, redis_limiter, KeyLimits(rpm=1))
    assert (await call(app, "POST", "/v1/chat/completions", CHAT)).status == 200
    reply = await call(app, "POST", "/v1/chat/completions", b"{not json")
    assert reply.status == 429 and "retry-after" in reply.headers
    unknown = await call(app, "POST", "/v1/chat/completions", {**CHAT, "model": "nope"})
    assert unknown.status == 429
    assert upstream.hits["ok"] == 1


async def test_a_bad_request_body_frees_its_concurrency_slot(app, upstream, redis_limiter):
    _limited(app, upstream, redis_limiter, KeyLimits(concurrency=1))
    assert (await call(app, "POST", "/v1/chat/completions", CHAT)).status == 200  # connects the pipe
    for bad in (
        b"{not json",
        b"[1, 2]",
        orjson.dumps({"messages": []}),
        orjson.dumps({**CHAT, "model": "nope"}),
    ):
        reply = await call(app, "POST", "/v1/chat/completions", bad)
        assert reply.status in (400, 404), reply.body
    assert await _active(redis_limiter) == 0
    # one slot: sequential requests keep being admitted (each one's release precedes the next)
    for _ in range(3):
        assert (await call(app, "POST", "/v1/chat/completions", CHAT)).status == 200
    assert await _active(redis_limiter) == 0
    assert upstream.hits["ok"] == 4


async def test_a_request_that_ends_before_its_admission_answers_frees_what_it_took(redis_limiter):
    limits = KeyLimits(concurrency=2)
    assert await redis_limiter.admit(1, limits, time.time()) is None  # connects the pipe; holds one
    admitted = redis_limiter.begin(1, limits, time.time())
    admitted.end(UsageTap())  # cancelled before the verdict was read
    assert await _active(redis_limiter) == 1  # its slot was freed once the reply came
    assert await redis_limiter.admit(1, limits, time.time()) is None  # both slots taken now
    refused = redis_limiter.begin(1, limits, time.time())
    refused.end(UsageTap())
    assert await _active(redis_limiter) == 2  # a refused admission frees nothing
    assert (await refused.verdict()).status == 429


async def test_drain_waits_for_a_finish_sent_again_after_the_scripts_were_flushed(redis_limiter):
    """An admission in flight queues its finish when its reply comes; a finish answered NOSCRIPT
    (the scripts flushed meanwhile, as another process may) is sent again: ``drain`` waits for
    all of it, however many rounds that takes."""
    import redis

    limits = KeyLimits(concurrency=2)
    assert await redis_limiter.admit(1, limits, time.time()) is None  # connects the pipe; holds one
    admitted = redis_limiter.begin(1, limits, time.time())  # its script call is on the wire
    admitted.end(UsageTap())
    with redis.Redis.from_url(REDIS_URL) as admin:
        admin.script_flush()  # the finish, sent when the admission's reply comes, gets NOSCRIPT
    assert await _active(redis_limiter) == 1


async def test_a_held_end_of_request_reaches_a_redis_that_lost_its_scripts(redis_limiter):
    """The end of a request is held to share the next write; a NOSCRIPT reply to it sends the
    source and frees the slot all the same."""
    limits = KeyLimits(concurrency=1, tpm=1000)
    assert await redis_limiter.admit(1, limits, time.time()) is None
    await redis_limiter.redis.script_flush()
    now = time.time()
    redis_limiter.finish_later(1, limits, 40, now)
    assert await _active(redis_limiter) == 0
    window = int(now // 60)
    assert int(await redis_limiter.redis.get(f"{redis_limiter.prefix}:1:t:{window}") or 0) == 40
    assert await redis_limiter.admit(1, limits, time.time()) is None


async def test_a_finish_answered_noscript_still_precedes_the_next_admission(redis_limiter):
    """The held end of one request shares a write with the next admission; when the scripts were
    flushed (a Redis restart, or another process's ``SCRIPT FLUSH``) both are answered NOSCRIPT and
    asked again. The finish must reach Redis first, or a one-slot key refuses its next request
    (a CI failure: the admission's retry overtook the finish's)."""
    limits = KeyLimits(concurrency=1)
    for _ in range(3):
        assert await redis_limiter.admit(1, limits, time.time()) is None  # the slot is taken
        redis_limiter.finish_later(1, limits, 0, time.time())  # held for the next write
        await redis_limiter.redis.script_flush()
        admission = redis_limiter.begin(1, limits, time.time())  # finish + admission: both NOSCRIPT
        time.sleep(0.05)  # the request decodes meanwhile: both replies are read by ``verdict`` at once
        assert await admission.verdict() is None
        admission.end(UsageTap())
        assert await _active(redis_limiter) == 0


async def test_a_dropped_connection_is_reopened_without_counting_in_the_worker(redis_limiter):
    """Redis closing the limiter's connection (a restart, an idle ``timeout``) costs a reconnect,
    not five seconds of per-worker counting."""
    limits = KeyLimits(rpm=100)
    assert await redis_limiter.admit(1, limits, time.time()) is None  # connects the pipe
    host, port = redis_limiter.pipe.conn.sock.getsockname()[:2]
    import redis

    with redis.Redis.from_url(REDIS_URL) as admin:  # blocking: the loop has not seen it yet
        admin.client_kill(f"{host}:{port}")
    for _ in range(2):  # the next admission may still find the old socket; it is retried
        admission = redis_limiter.begin(1, limits, time.time())
        assert await admission.verdict() is None
        admission.end(UsageTap())
    assert await redis_limiter.admit(1, limits, time.time()) is None
    assert redis_limiter.down_until == 0.0 and not redis_limiter.local.requests
    window = int(time.time() // 60)
    counted = [await redis_limiter.redis.get(f"{redis_limiter.prefix}:1:r:{w}") for w in (window - 1, window)]
    assert sum(int(v or 0) for v in counted) == 4
