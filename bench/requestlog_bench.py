"""What request logging costs on the hot path: a micro-benchmark of the request-log recorder.

Two measurements, in-process (no server, no network), so the numbers are the recorder's own:

1. ``hooks``: one non-stream request's hooks (decoded, attempt start, upstream status, whole
   response with usage, client response, attempt done, finish: the recorder sealed), with the
   hand-off replaced by ``list.append`` -- the work done on the event loop besides the queue;
2. ``row``: what the writer thread then does per request before the insert (the row's values
   built and priced, ``Writer.prepare``);
3. ``submit``: the hand-off itself, ``queue.put_nowait`` on the writer's bounded queue (the
   writer thread is not started, the queue drained in between);
4. ``stream``: the per-batch hook a stream calls for each upstream chunk (one text delta).

The access line is switched off (as ``make bench`` runs): its formatting is the observe
recorder's, with or without request logs.

    .venv/bin/python bench/requestlog_bench.py [--n 20000]

The issue's budget is 0.05 ms p50 at one connection for logging on against off; compare the
``hooks`` + ``submit`` sum against it.
"""

from __future__ import annotations

import argparse
import os
import queue
import statistics
import sys
import time
from decimal import Decimal
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gateway.settings")


def main() -> None:
    import logging

    import django

    django.setup()
    logging.getLogger("gateway.access").setLevel(logging.WARNING)
    from gateway.proxy.snapshot import ModelPrice
    from gateway.urp import Response, Usage
    from gateway.urp.events import NodeDelta
    from requestlogs import recorder as rl

    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=20000)
    n = parser.parse_args().n

    sunk: list = []
    rl.sink.submit = sunk.append  # measure the recorder alone first
    factory = rl.make_factory(True)
    price = ModelPrice(
        input=Decimal("3"), output=Decimal("15"), cache_read=Decimal("0.3"), multiplier=Decimal("1.5")
    )
    provider = SimpleNamespace(id=1, name="acme")
    channel = SimpleNamespace(id=2, name="main", prices={"gpt-4o": price})
    att = SimpleNamespace(provider=provider, channel=channel, upstream_model="gpt-4o-2024", affinity=None)
    call = SimpleNamespace(logical_model="gpt-4o", client_stream=False)
    key = SimpleNamespace(id=7, name="k", capture_mode="off")
    snap = SimpleNamespace(settings=SimpleNamespace(capture_enabled=False))
    resp = Response(
        id="r", model="gpt-4o", usage=Usage(input_tokens=1200, output_tokens=300, cache_read_tokens=200)
    )
    body = b'{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}'

    def one() -> None:
        ex = SimpleNamespace(
            t0=time.perf_counter(),
            request_id="0123456789abcdef0123456789abcdef",
            client_request_id=None,
            protocol="chat_completion",
            endpoint="chat",
            client=("127.0.0.1", 5000),
            finished=True,
            status=200,
        )
        rec = factory(ex, snap, key, body)
        rec.on_request_decoded(call)
        rec.on_attempt_start(att)
        t = time.perf_counter()
        rec.on_upstream_response(200, t)
        rec.on_response(resp, [])
        rec.on_client_response(200, b"{}")
        rec.on_attempt_done(att, t)
        rec.on_finish(ex, None)

    def timed(fn, rounds: int) -> list[float]:
        out = []
        for _ in range(rounds):
            t = time.perf_counter()
            fn()
            out.append((time.perf_counter() - t) * 1e6)
        return out

    for _ in range(2000):
        one()
    sunk.clear()
    hooks = timed(one, n)
    sealed = list(sunk)
    prepare = rl.sink.writer.prepare
    rows = iter(sealed)
    built = timed(lambda: prepare(next(rows)), n)
    row = sealed[-1].row()

    q: queue.Queue = queue.Queue(maxsize=100000)
    submit = []
    for i in range(n):
        if i % 50000 == 0:
            while not q.empty():
                q.get_nowait()
        t = time.perf_counter()
        q.put_nowait(row)
        submit.append((time.perf_counter() - t) * 1e6)

    rec = factory(
        SimpleNamespace(
            t0=0.0,
            request_id="x",
            client_request_id=None,
            protocol="chat_completion",
            endpoint="chat",
            client=None,
            finished=True,
            status=200,
        ),
        snap,
        key,
        body,
    )
    batch = [NodeDelta(index=0, kind="text", delta="hello ")]
    stream = timed(lambda: rec.on_response_events(batch), n)

    def show(name: str, xs: list[float]) -> None:
        xs = sorted(xs)
        print(f"{name:8s} p50 {statistics.median(xs):7.2f} us   p99 {xs[int(len(xs) * 0.99)]:7.2f} us")

    print(f"request-log recorder, {n} rounds (cost {row['cost_nano']} nano-USD per sample request)")
    show("hooks", hooks)
    show("row", built)
    show("submit", submit)
    show("stream", stream)
    loop = statistics.median(hooks) + statistics.median(submit)
    total = loop + statistics.median(built)
    print(
        f"event loop per request (hooks + submit, p50): {loop:.2f} us; with the writer's row: {total:.2f} us"
    )


if __name__ == "__main__":
    main()
