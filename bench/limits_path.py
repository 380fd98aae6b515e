"""The whole request path with and without per-key limits (issue 17), in one process: the proxy
ASGI app driven directly (no HTTP server), a fake upstream (aiohttp, same loop) and a real Redis
for the limiter, on uvloop like the gateway.

    .venv/bin/python bench/limits_path.py [TREE] [--requests 1500] [--rounds 5] [--redis URL] [--local]

Each round runs ``--requests`` non-streaming chat requests for a key without limits (``off``),
then as many for a key with never-refusing rpm/tpm/concurrency limits (``on``), one at a time
(one connection). Printed per round: median and p90 wall time per request, and CPU per request
(``time.process_time``, which also counts the fake upstream, the same in both). ``on - off`` of
the same round is the limits' cost; compare trees by running them interleaved (``TREE`` is a
checkout to import ``gateway`` from, e.g. ``git archive REV | tar -x -C DIR``).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any


async def _block(app: Any, call: Any, body: dict, requests: int) -> tuple[list[float], float]:
    walls = []
    cpu0 = time.process_time()
    for _ in range(requests):
        t = time.perf_counter()
        reply = await call(app, "POST", "/v1/chat/completions", body)
        walls.append(time.perf_counter() - t)
        assert reply.status == 200, reply.body
    return walls, (time.process_time() - cpu0) / requests


async def measure(url: str, requests: int, rounds: int, local: bool = False) -> None:
    import redis.asyncio as aioredis

    from gateway.crypto import hash_api_key
    from gateway.proxy.limits import KeyLimits, RedisLimiter
    from gateway.wiring import build_proxy_app
    from tests.proxy.helpers import SECRET, FakeUpstream, call, channel, key, provider, snapshot

    up = FakeUpstream()
    await up.start()
    app = build_proxy_app()
    prefix = f"gw:limits:pathbench:{os.getpid()}"
    client = aioredis.from_url(url, socket_timeout=0.25, socket_connect_timeout=0.25)
    if not local:  # else the app's own LocalLimiter: the pipeline's cost without Redis
        app.runtime.limiter = RedisLimiter(client, prefix=prefix)
    chan = channel(1, base_url=f"{up.base}/ok/v1", models={"m": "up-m"})
    plain = key()
    limited = dataclasses.replace(
        plain, limits=KeyLimits(rpm=100_000_000, tpm=100_000_000_000, concurrency=100_000)
    )
    snaps = {
        "off": snapshot([provider(1, [chan])], {hash_api_key(SECRET): plain}),
        "on": snapshot([provider(1, [chan])], {hash_api_key(SECRET): limited}),
    }
    body = {"model": "m", "messages": [{"role": "user", "content": "hi " * 50}] * 8}
    for mode in ("off", "on"):  # warm-up
        app.holder.set(snaps[mode])
        await _block(app, call, body, 300)
    diffs = []
    for r in range(rounds):
        out = {}
        for mode in ("off", "on"):
            app.holder.set(snaps[mode])
            walls, cpu = await _block(app, call, body, requests)
            walls.sort()
            out[mode] = (statistics.median(walls), walls[int(0.9 * len(walls))], cpu)
            await app.runtime.limiter.drain()
        d = [1000 * (out["on"][i] - out["off"][i]) for i in range(3)]
        diffs.append(d)
        print(
            f"round {r}: off p50 {1000 * out['off'][0]:.3f} p90 {1000 * out['off'][1]:.3f} "
            f"cpu {1000 * out['off'][2]:.3f} | on p50 {1000 * out['on'][0]:.3f} "
            f"p90 {1000 * out['on'][1]:.3f} cpu {1000 * out['on'][2]:.3f} | "
            f"on-off p50 {d[0]:+.3f} p90 {d[1]:+.3f} cpu {d[2]:+.3f} ms",
            flush=True,
        )
    med = [statistics.median(d[i] for d in diffs) for i in range(3)]
    print(f"median on-off: p50 {med[0]:+.3f} ms  p90 {med[1]:+.3f} ms  cpu {med[2]:+.3f} ms/req")
    keys = [k async for k in client.scan_iter(f"{prefix}:*")]
    if keys:
        await client.delete(*keys)
    await client.aclose()
    await app.client.close()
    await up.stop()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("tree", nargs="?", type=Path, default=Path(__file__).resolve().parent.parent)
    parser.add_argument("--requests", type=int, default=1500)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--local", action="store_true", help="count in memory (no Redis)")
    parser.add_argument("--redis", default=os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/15"))
    args = parser.parse_args()
    sys.path.insert(0, str(args.tree.resolve()))
    os.chdir(args.tree)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gateway.settings")
    os.environ.setdefault("GATEWAY_REQUEST_LOGS", "false")  # no database here
    import logging

    import django
    import uvloop

    django.setup()
    logging.disable(logging.WARNING)  # the access log line per request would dominate
    print(f"{args.tree}:")
    uvloop.run(measure(args.redis, args.requests, args.rounds, args.local))


if __name__ == "__main__":
    main()
