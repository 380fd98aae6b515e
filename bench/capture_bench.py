"""Capture off vs on, alone: the bench's capture case without the rest of ``bench/run.py``.

    .venv/bin/python bench/capture_bench.py --runs 3 --seconds 8 --connections 64

Starts nginx (canned answers) and the gateway the way ``bench/run.py`` does (uvicorn, two workers,
SQLite, no Redis; capture on globally, one key with capture ``off`` and one with ``all``), then runs
the Chat -> Chat case for each key, interleaved. Before each run it waits until the workers are
idle; after it, until the capture writer has drained (``drain``). The robust figure on a shared box
is the workers' CPU per request including the drain (utime + stime of every worker process and
its children, i.e. a writer process too); req/s is reported but depends on what else ran. At the
end: captures persisted (rows) and dropped (the writer's shed counter, from its log lines).
"""

from __future__ import annotations

import argparse
import re
import sqlite3
import statistics
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from harness import nginx_mock, payloads, procs, servers, wrk  # noqa: E402


def tree_cpu(pids: list[int]) -> float:
    """CPU seconds of the workers and their children (a writer process, if any)."""
    return sum(procs.cpu_seconds(p) + sum(procs.cpu_seconds(c) for c in procs.children(p)) for p in pids)


def tree_pids(master: int) -> list[int]:
    workers = procs.worker_pids(master)
    return workers + [c for w in workers for c in procs.children(w)]


def dropped(log: Path) -> int:
    """Captures shed: the writer's ``capture dropped`` lines (at most one a second, each saying
    how many were dropped since the previous one; older builds wrote one line per capture). The
    drops after a process's last line are not in the log: this is a lower bound."""
    total = 0
    if log.exists():
        for line in log.read_bytes().splitlines():
            if b"capture dropped" in line:
                m = re.search(rb"; (\d+) dropped since the last such line", line)
                total += int(m.group(1)) if m else 1
    return total


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--seconds", type=float, default=8)
    p.add_argument("--connections", type=int, nargs="+", default=[64])
    p.add_argument("--workers", type=int, default=2)
    p.add_argument(
        "--gc-probe",
        action="store_true",
        help="serve harness.gc_probe (the same app, every collection timed) and report GC per run",
    )
    args = p.parse_args()
    work = BENCH / "out" / ("capture-" + time.strftime("%Y%m%dT%H%M%S"))
    work.mkdir(parents=True, exist_ok=True)
    ports = {n: procs.free_port() for n in ("nginx", "paced", "gateway")}
    up = servers.Upstreams(ports["nginx"], ports["paced"])
    gw = servers.Gateway(work, ports["gateway"], workers=args.workers)
    probe_dir = work / "gc"
    if args.gc_probe:
        gw.probe_gc(probe_dir)
    nginx = nginx_mock.start(work, ports["nginx"])
    try:
        gw.manage("migrate", "--noinput", "-v", "0")
        gw.configure(up, capture=True)
        gw.start()
        body = work / "chat.json"
        body.write_bytes(payloads.dumps(payloads.chat_body("bench-chat")))
        scripts = {
            "off": wrk.write_script(
                work / "off.lua",
                [
                    wrk.WrkRequest(
                        "/v1/chat/completions", body, {"authorization": f"Bearer {servers.PLAIN_KEY}"}
                    )
                ],
            ),
            "on": wrk.write_script(
                work / "on.lua",
                [
                    wrk.WrkRequest(
                        "/v1/chat/completions", body, {"authorization": f"Bearer {servers.CAPTURE_KEY}"}
                    )
                ],
            ),
        }
        total_on = 0
        for conns in args.connections:
            res: dict[str, list[tuple[float, float, float]]] = {"off": [], "on": []}
            for run in range(args.runs):
                for system in ("off", "on"):
                    pids = tree_pids(gw.proc.pid)
                    procs.wait_quiet(pids)
                    pids = tree_pids(gw.proc.pid)
                    cpu0 = tree_cpu(procs.worker_pids(gw.proc.pid))
                    split0 = procs.thread_cpu(procs.worker_pids(gw.proc.pid))
                    began = time.time()
                    r = wrk.run(ports["gateway"], scripts[system], connections=conns, seconds=args.seconds)
                    ended = time.time()
                    split1 = procs.thread_cpu(procs.worker_pids(gw.proc.pid))
                    drain = procs.wait_quiet(tree_pids(gw.proc.pid))
                    cpu = tree_cpu(procs.worker_pids(gw.proc.pid)) - cpu0
                    ms = cpu * 1000 / max(1, r.requests)
                    res[system].append((r.rps, ms, drain))
                    if system == "on":
                        total_on += r.requests
                    print(
                        f"{conns:3d} conn run {run + 1} capture {system:3s} {r.rps:8.0f} req/s  "
                        f"CPU {ms:6.3f} ms/req (incl. drain {drain:4.1f} s)  p99 {r.p99:7.3f} ms  "
                        f"errors {r.errors} non2xx {r.non2xx}; during the run: loops "
                        f"{(split1[0] - split0[0]) / args.seconds:.2f} cores, other threads "
                        f"{(split1[1] - split0[1]) / args.seconds:.2f} cores",
                        flush=True,
                    )
                    if args.gc_probe:
                        per_gen: dict[int, list[float]] = {}
                        for gen, pause in servers.gc_pauses(probe_dir, began, ended):
                            per_gen.setdefault(gen, []).append(pause)
                        print(
                            "    GC during the run (both workers): "
                            + ", ".join(
                                f"gen{g} {len(p)} x, {sum(p):.0f} ms ({sum(p) / max(1, r.requests) * 1000:.1f} us/req)"
                                for g, p in sorted(per_gen.items())
                            ),
                            flush=True,
                        )
            med = {
                s: (statistics.median(x[0] for x in v), statistics.median(x[1] for x in v))
                for s, v in res.items()
            }
            print(
                f"== {conns} conn: off {med['off'][0]:.0f} req/s {med['off'][1]:.3f} ms/req | on "
                f"{med['on'][0]:.0f} req/s {med['on'][1]:.3f} ms/req | on/off req/s "
                f"{med['on'][0] / med['off'][0]:.2f} | extra CPU {med['on'][1] - med['off'][1]:.3f} ms/req",
                flush=True,
            )
        time.sleep(1)
        with sqlite3.connect(gw.workdir / "bench.sqlite3") as db:
            persisted = db.execute("SELECT COUNT(*) FROM captures_capture").fetchone()[0]
        print(
            f"captures: requests with capture on {total_on}, persisted {persisted}, not persisted "
            f"{total_on - persisted}; drops logged {dropped(gw.workdir / 'uvicorn.log')}",
            flush=True,
        )
    finally:
        procs.stop(gw.proc)
        procs.stop(nginx)


if __name__ == "__main__":
    main()
