"""Breaker state shared between workers through Redis (two boards stand for two workers)."""

from __future__ import annotations

import asyncio
import os

import pytest

from gateway.proxy.breaker import BreakerBoard, RedisMirror

REDIS_URL = os.environ.get("REDIS_URL_FOR_TESTS", "redis://127.0.0.1:6379/15")
pytestmark = pytest.mark.asyncio


@pytest.fixture
async def boards():
    import redis.asyncio as aioredis

    probe = aioredis.Redis.from_url(REDIS_URL, socket_connect_timeout=1)
    try:
        await probe.ping()
    except Exception:
        pytest.skip("Redis is not reachable")
    await probe.flushdb()
    a, b = BreakerBoard(), BreakerBoard()
    mirrors = [RedisMirror(a, REDIS_URL), RedisMirror(b, REDIS_URL)]
    yield a, b, mirrors
    for m in mirrors:
        await m.stop()
    await probe.flushdb()
    await probe.aclose()


async def settle(mirror: RedisMirror) -> None:
    for _ in range(100):
        if not mirror._tasks:
            return
        await asyncio.sleep(0.01)


async def test_open_and_close_propagate_between_workers(boards):
    a, b, (ma, mb) = boards
    for _ in range(3):
        a.record_failure(11)
    assert a.is_open(11)
    await settle(ma)
    await mb.pull_once()
    assert b.is_open(11)  # worker B skips the channel worker A saw failing
    b.record_success(11)
    await settle(mb)
    await ma.pull_once()
    assert not a.is_open(11)  # B's success closed it everywhere


async def test_failures_add_up_across_workers(boards):
    a, b, (ma, mb) = boards
    a.record_failure(12)
    await settle(ma)
    b.record_failure(12)
    await settle(mb)
    assert not a.is_open(12) and not b.is_open(12)
    a.record_failure(12)  # third failure overall, second on A
    await settle(ma)
    assert a.is_open(12)
    await mb.pull_once()
    assert b.is_open(12)
