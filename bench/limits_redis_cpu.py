"""CPU per request of the Redis limiter alone (issue 17): admission, then the end of the request,
for a key with never-refusing limits, against a real Redis, on uvloop like the gateway.

    .venv/bin/python bench/limits_redis_cpu.py [TREE] [--requests 2000] [--redis redis://127.0.0.1:6379/15]

``TREE`` is a source checkout to import ``gateway.proxy.limits`` from (default: this one), so a
baseline (``git archive REV | tar -x -C DIR``) and this tree can be run interleaved on a busy
box, where a whole gateway's CPU per request moves by ±0.5 ms between minutes and this
figure (the limiter's own share) by about ±0.1 ms. ``path/req`` is what a request waits for:
the admission, plus the end of the request when the tree awaits it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path
from typing import Any


async def _one(limiter: Any, limits: Any) -> None:
    assert await limiter.admit(1, limits, time.time()) is None
    if hasattr(limiter, "finish_later"):  # the end of the request off its path
        limiter.finish_later(1, limits, 30, time.time(), 0)
        await asyncio.sleep(0)  # the answer is sent; the loop moves on
    else:
        await limiter.release(1, limits)
        await limiter.settle(1, limits, 30, time.time(), 0)


async def measure(url: str, requests: int) -> str:
    import redis.asyncio as aioredis
    from redis.utils import HIREDIS_AVAILABLE

    from gateway.proxy.limits import KeyLimits, RedisLimiter

    client = aioredis.from_url(url, socket_timeout=0.25, socket_connect_timeout=0.25)
    prefix = f"gw:limits:cpubench:{os.getpid()}"
    limiter = RedisLimiter(client, prefix=prefix)
    limits = KeyLimits(rpm=100_000_000, tpm=100_000_000_000, concurrency=100_000)
    for _ in range(300):
        await _one(limiter, limits)
    cpu0, wall0, path = time.process_time(), time.perf_counter(), 0.0
    for _ in range(requests):
        started = time.perf_counter()
        await _one(limiter, limits)
        path += time.perf_counter() - started
    if hasattr(limiter, "drain"):
        await limiter.drain()
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    keys = [k async for k in client.scan_iter(f"{prefix}:*")]
    if keys:
        await client.delete(*keys)
    await client.aclose()
    return (
        f"hiredis={HIREDIS_AVAILABLE} CPU ms/req {1000 * cpu / requests:.3f}  "
        f"wall ms/req {1000 * wall / requests:.3f}  path ms/req {1000 * path / requests:.3f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("tree", nargs="?", type=Path, default=Path(__file__).resolve().parent.parent)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--redis", default=os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/15"))
    args = parser.parse_args()
    sys.path.insert(0, str(args.tree.resolve()))
    import uvloop

    print(f"{args.tree}: {uvloop.run(measure(args.redis, args.requests))}")


if __name__ == "__main__":
    main()
