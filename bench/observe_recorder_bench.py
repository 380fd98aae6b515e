"""Micro-benchmark: what the always-on observe recorder (``gateway.observe.recorder``: metrics,
access line, live tail) costs per request, CPU only (no server, no network).

One request's hook sequence (factory, decoded, attempt start, upstream status, client response,
attempt done, whole response, finish) is replayed against:

- ``null``: the do-nothing recorder (the floor: what the pipeline's calls cost anyway);
- ``observe, log off``: metrics only (the access line's level disabled), no live viewer;
- ``observe, log on``: metrics plus the text access line written to /dev/null;
- ``observe, json log``: the same with the JSON formatter.

Run it twice to see both Prometheus modes (multiprocess writes memory-mapped files)::

    .venv/bin/python bench/observe_recorder_bench.py
    PROMETHEUS_MULTIPROC_DIR=$(mktemp -d) .venv/bin/python bench/observe_recorder_bench.py

Prints CPU µs per request (``time.process_time``, median of several runs). Not a test: tests never assert on time.
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import time
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gateway.observe import accesslog, live, recorder  # noqa: E402
from gateway.observe.accesslog import JsonFormatter, TextFormatter  # noqa: E402
from gateway.observe.unrecorded import unrecorded_factory  # noqa: E402
from gateway.proxy.recorder import NULL_RECORDER  # noqa: E402
from gateway.urp import Usage  # noqa: E402


def _objects():
    ex = SimpleNamespace(
        request_id="req-bench",
        protocol="chat_completion",
        endpoint="/v1/chat/completions",
        t0=time.perf_counter(),
        status=200,
    )
    key = SimpleNamespace(name="bench-key", id=1)
    call = SimpleNamespace(logical_model="bench-model", client_stream=False)
    att = SimpleNamespace(
        provider=SimpleNamespace(name="bench-provider"),
        channel=SimpleNamespace(name="bench-channel", id=7, prices={}),
    )
    resp = SimpleNamespace(usage=Usage(input_tokens=120, output_tokens=40))
    return ex, key, call, att, resp


def one_request(factory, ex, key, call, att, resp) -> None:
    rec = factory(ex, None, key, b"")
    rec.on_request_decoded(call)
    rec.on_attempt_start(att)
    t = time.perf_counter()
    rec.on_upstream_response(200, t)
    rec.on_response(resp, [])
    rec.on_client_response(200, b"{}")
    rec.on_attempt_done(att, t)
    rec.on_finish(ex, None)


def one_refusal(factory, ex, key, call, att, resp) -> None:
    """A 401 observed after the answer (``RecorderSet.finish_unrecorded``), metrics and access line."""
    ex.status = 401
    rec = factory(ex, None)
    rec.on_finish(ex, "unauthorized: invalid or missing API key")


def measure(factory, n: int, runs: int, one=one_request) -> float:
    objs = _objects()
    for _ in range(1000):
        one(factory, *objs)
    samples = []
    for _ in range(runs):
        start = time.process_time()  # CPU time: the figure that matters, and steadier on a busy machine
        for _ in range(n):
            one(factory, *objs)
        samples.append((time.process_time() - start) / n * 1e6)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=20000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    devnull = open(os.devnull, "w")  # noqa: SIM115 - lives for the process
    handler = logging.StreamHandler(devnull)
    accesslog.log.addHandler(handler)
    accesslog.log.propagate = False
    recorder.configure("INFO")
    live.poll_checked = True  # no Django here: the channel layer (and its Redis poll) stay out
    mode = "multiprocess" if os.environ.get("PROMETHEUS_MULTIPROC_DIR") else "single process"
    print(f"observe recorder, prometheus_client {mode}: µs per request (median of {args.runs} × {args.n})")
    print("| recorder | µs/request |\n|---|---|")
    print(f"| null | {measure(lambda *a: NULL_RECORDER, args.n, args.runs):.2f} |")
    accesslog.log.setLevel(logging.WARNING)
    print(f"| observe, log off | {measure(recorder.observe_recorder, args.n, args.runs):.2f} |")
    accesslog.log.setLevel(logging.INFO)
    handler.setFormatter(TextFormatter())
    print(f"| observe, text log on | {measure(recorder.observe_recorder, args.n, args.runs):.2f} |")
    handler.setFormatter(JsonFormatter())
    print(f"| observe, json log on | {measure(recorder.observe_recorder, args.n, args.runs):.2f} |")
    handler.setFormatter(TextFormatter())
    logged = unrecorded_factory(keyless_per_second=-1, logged=None, queue_busy=lambda: False)
    shed = unrecorded_factory(keyless_per_second=0, logged=None, queue_busy=lambda: False)
    print(f"| keyless 401, text log on | {measure(logged, args.n, args.runs, one_refusal):.2f} |")
    print(f"| keyless 401, shed (over budget) | {measure(shed, args.n, args.runs, one_refusal):.2f} |")


if __name__ == "__main__":
    main()
