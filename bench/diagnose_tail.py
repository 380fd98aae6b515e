"""Why is p99 at 64 connections what it is? A diagnosis run, separate from ``bench/run.py``.

Serves the gateway (two workers, the production flags) through ``harness.gc_probe`` so every
garbage collection's pause is recorded, puts 64 connections of Chat → Chat on it with wrk, and
meanwhile samples how the client connections are split between the workers (``ss``) and how much
CPU each worker gets. Prints a Markdown summary (also written to ``bench/out/tail-*.md``).

    .venv/bin/python bench/diagnose_tail.py [--runs 3] [--seconds 10] [--connections 64]
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import re
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))

from harness import nginx_mock, payloads, procs, servers, wrk  # noqa: E402

PID_RE = re.compile(rb"pid=(\d+)")


def connection_split(port: int) -> dict[int, int]:
    out = subprocess.run(
        ["ss", "-Htnp", "state", "established", f"( sport = :{port} )"], capture_output=True
    ).stdout
    split: dict[int, int] = {}
    for line in out.splitlines():
        m = PID_RE.search(line)
        if m:
            split[int(m.group(1))] = split.get(int(m.group(1)), 0) + 1
    return split


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--gc-threshold",
        help="experiment: gc.set_threshold(a, b, c) in each worker, e.g. 50000,20,10 (a goes through "
        "GATEWAY_GC_GEN0_THRESHOLD, which the worker applies at start-up)",
    )
    parser.add_argument(
        "--compare-threshold",
        action="store_true",
        help="run as shipped, then with Python's default young-generation threshold (700), and "
        "write both to --output",
    )
    parser.add_argument("--output", help="also write the Markdown here (e.g. bench/TAIL.md)")
    args = parser.parse_args()
    os.chdir(ROOT)
    variants = [args.gc_threshold, "700,10,10"] if args.compare_threshold else [args.gc_threshold]
    text = "\n".join(diagnose(args, threshold) for threshold in variants)
    if args.output:
        Path(args.output).write_text(HEADER + text)
    print(text)


HEADER = """# Tail latency at 64 connections: what the p99 is made of

Written by `bench/diagnose_tail.py --compare-threshold` (called by `make bench` after the main run).
The gateway is served exactly as in `bench/RESULTS.md` (uvicorn, two workers, uvloop, httptools,
SQLite), except that the ASGI module is `bench/harness/gc_probe.py`, which imports the gateway's app
unchanged and records every garbage collection's pause in each worker. wrk puts 64 connections of
Chat → Chat on it; meanwhile `ss` samples how the client connections are split between the two workers
and /proc gives each worker's CPU. As shipped, a worker freezes what it allocated until its start-up
(`gc.freeze()`) and raises the young generation's threshold from Python's 700 to
`GATEWAY_GC_GEN0_THRESHOLD` (7000); the second table puts Python's 700 back, for comparison.

How to read it: a worker that runs a full (generation 2) collection stops serving all of its connections
for the whole pause, so with ~32 connections per worker every long pause lands in the p99 directly.
Without `gc.freeze()` a full collection re-scanned every object Django and the gateway allocated at
import (a few hundred thousand), tens of milliseconds each time (65-290 ms measured before the freeze
shipped); frozen, the longest pause is a few milliseconds. With the threshold at 700, the requests in
flight (a few hundred containers each while they run) reach it by themselves: a young collection about
every 20 requests, whose pauses add up to several percent of a worker; at 7000 young collections are
left to objects that outlive their request. The second thing to look at is the connection split:
uvicorn's workers share one listening socket and the kernel gives each new connection to whichever
worker accepts first, so 64 connections opened at once can land 60 / 4, and then one worker (one core)
serves nearly all the traffic while the other idles. "CPU per worker" shows how much of a core each
worker actually got on this shared box.

"""


def diagnose(args: argparse.Namespace, threshold: str | None) -> str:
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    workdir = BENCH / "out" / f"tail-{stamp}"
    gcdir = workdir / "gc"
    gcdir.mkdir(parents=True)
    up = servers.Upstreams(procs.free_port(), procs.free_port())
    nginx = nginx_mock.start(workdir, up.nginx_port)
    gw = servers.Gateway(workdir, procs.free_port(), workers=args.workers)
    gw.probe_gc(gcdir)
    if threshold:
        gw.env["GC_PROBE_THRESHOLD"] = threshold
        gw.env["GATEWAY_GC_GEN0_THRESHOLD"] = threshold.split(",")[0]
    variant = f"with gc thresholds {threshold}" if threshold else "as shipped"
    lines: list[str] = []
    try:
        gw.prepare(up)
        gw.start()
        body = workdir / "chat.json"
        body.write_bytes(payloads.dumps(payloads.chat_body("bench-chat")))
        script = wrk.write_script(
            workdir / "chat.lua",
            [wrk.WrkRequest("/v1/chat/completions", body, {"authorization": f"Bearer {servers.PLAIN_KEY}"})],
        )
        workers = procs.worker_pids(gw.proc.pid)
        lines += [
            f"## {args.connections} connections, {args.workers} workers, collector {variant} ({stamp})",
            "",
            "| run | req/s | p50 ms | p99 ms | max ms | connections per worker | CPU per worker (cores) | "
            "GC: collections (gen0/1/2) | GC pause total ms | GC pauses > 5 ms | longest GC pause ms |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        for run in range(args.runs):
            splits: list[dict[int, int]] = []
            stop = threading.Event()

            def sample(stop=stop, splits=splits) -> None:
                while not stop.wait(1.0):
                    splits.append(connection_split(gw.port))

            cpu0 = {p: procs.cpu_seconds(p) for p in workers}
            t0 = time.time()
            sampler = threading.Thread(target=sample, daemon=True)
            sampler.start()
            res = wrk.run(gw.port, script, connections=args.connections, seconds=args.seconds)
            stop.set()
            sampler.join()
            t1 = time.time()
            cpu = {p: (procs.cpu_seconds(p) - cpu0[p]) / (t1 - t0) for p in workers}
            gens, total, over, longest = [0, 0, 0], [], 0, 0.0
            for g, ms in servers.gc_pauses(gcdir, t0, t1):
                gens[g] += 1
                total.append(ms)
                over += ms > 5
                longest = max(longest, ms)
            per_worker = {
                p: statistics.median([s.get(p, 0) for s in splits]) if splits else 0 for p in workers
            }
            lines.append(
                f"| {run + 1} | {res.rps:.0f} | {res.p50:.2f} | {res.p99:.2f} | {res.max:.2f} | "
                f"{' / '.join(f'{per_worker[p]:.0f}' for p in workers)} | "
                f"{' / '.join(f'{cpu[p]:.2f}' for p in workers)} | {'/'.join(map(str, gens))} | "
                f"{sum(total):.1f} | {over} | {longest:.1f} |"
            )
            print(lines[-1], flush=True)
        lines += ["", f"Load average at the end: {' '.join(Path('/proc/loadavg').read_text().split()[:3])}."]
    finally:
        procs.stop(gw.proc)
        procs.stop(nginx)
    text = "\n".join(lines) + "\n"
    (BENCH / "out" / f"tail-{stamp}.md").write_text(text)
    return text


if __name__ == "__main__":
    main()
