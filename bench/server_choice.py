"""Which ASGI server runs the gateway's workers (issue 20): measured, not assumed.

Starts the same gateway (SQLite, two workers, capture off) three ways, side by side on one box:

- ``uvicorn``: ``uvicorn --workers 2 --loop uvloop --http httptools`` (one listening socket shared
  by the workers; the kernel wakes whichever worker accepts first);
- ``reuseport``: ``python -m gateway.launch`` (uvicorn workers, uvloop, httptools, one
  ``SO_REUSEPORT`` socket per worker: the kernel hashes connections over the workers);
- ``granian``: ``granian --interface asgi --workers 2 --loop uvloop`` (if importable: the
  script installs it into ``bench/.granian`` with pip when missing, never into the project venv).

Checks each answers a Chat request and a paced stream (lifespan ran: the snapshot is loaded), then
runs wrk at 64 connections, interleaved (uvicorn, reuseport, granian, uvicorn, ...), and reports per
system: req/s, p99, CPU ms per request (the workers' user+sys over the requests served: the robust
figure on a shared box) and how the 64 connections were split over the workers (``ss -tnp``
sampled mid-run; the worst split of the runs), plus the streams' first byte.

    .venv/bin/python bench/server_choice.py [--runs 3] [--seconds 8] [--output bench/SERVERS.md]
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))

from diagnose_tail import connection_split  # noqa: E402
from harness import nginx_mock, payloads, procs, servers, stream_client, wrk  # noqa: E402
from harness.stats import Figure  # noqa: E402

GRANIAN_DIR = BENCH / ".granian"
GRANIAN_SPEC = "granian>=2.5,<3"


def granian_path() -> str | None:
    """A PYTHONPATH entry where granian imports, installing it there once; None if that fails."""
    probe = [sys.executable, "-c", "import granian"]
    if subprocess.run(probe, capture_output=True).returncode == 0:
        return ""
    env = {**os.environ, "PYTHONPATH": str(GRANIAN_DIR)}
    if subprocess.run(probe, capture_output=True, env=env).returncode != 0:
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "-q", "--target", str(GRANIAN_DIR), GRANIAN_SPEC],
            check=False,
        )
    return str(GRANIAN_DIR) if subprocess.run(probe, capture_output=True, env=env).returncode == 0 else None


def start(
    workdir: Path, up: servers.Upstreams, server: str, workers: int, extra_path: str
) -> servers.Gateway:
    gw = servers.Gateway(workdir / server, procs.free_port(), workers=workers, server=server)
    if extra_path:
        gw.env["PYTHONPATH"] = extra_path
    gw.prepare(up)
    gw.start()
    return gw


def check(gw: servers.Gateway, chat: bytes, stream: bytes, headers: dict[str, str]) -> str | None:
    status, body = asyncio.run(stream_client.fetch(gw.port, "/v1/chat/completions", chat, headers))
    if status != 200 or b"Echo: hello benchmark" not in body:
        return f"chat: HTTP {status} {body[:200]!r}"
    status, body = asyncio.run(stream_client.fetch(gw.port, "/v1/chat/completions", stream, headers))
    if status != 200 or b"[DONE]" not in body:
        return f"stream: HTTP {status} {body[:200]!r}"
    return None


def measure(gw: servers.Gateway, script: Path, args: argparse.Namespace) -> dict:
    workers = procs.worker_pids(gw.proc.pid)
    splits: list[dict[int, int]] = []

    def sample() -> None:
        time.sleep(min(2.0, args.seconds / 2))
        splits.append(connection_split(gw.port))

    sampler = threading.Thread(target=sample)
    cpu0 = sum(procs.cpu_seconds(p) for p in workers)
    sampler.start()
    res = wrk.run(gw.port, script, connections=args.connections, seconds=args.seconds)
    sampler.join()
    cpu = sum(procs.cpu_seconds(p) for p in workers) - cpu0
    split = sorted(splits[0].values(), reverse=True) if splits else []
    return {
        "rps": res.rps,
        "p99": res.p99,
        "errors": res.errors + res.non2xx,
        "cpu_ms": cpu * 1000 / res.requests if res.requests else float("nan"),
        "split": split,
    }


def report(
    rows: dict[str, list[dict]],
    firsts: dict[str, list[float]],
    failed: dict[str, str],
    args: argparse.Namespace,
) -> str:
    stamp = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    out = [
        f"# ASGI server choice ({stamp})",
        "",
        f"Written by `bench/server_choice.py`: the gateway (two workers, SQLite, capture off) served three ways "
        f"side by side; Chat → Chat at {args.connections} connections, wrk {args.seconds:g} s per run, {args.runs} "
        "runs interleaved. CPU ms per request = the workers' user+sys time over the requests served (robust on "
        "a shared box); split = client connections per worker, from `ss -tnp` mid-run (each run's split listed); "
        "stream first byte = p50 of 25 paced streams over one connection. Median (min–max) of the runs.",
        "",
        "| server | req/s | p99 ms | CPU ms / request | connections per worker (each run) | stream first byte ms | errors |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, runs in rows.items():

        def fig(key: str, digits: int, runs: list[dict] = runs) -> str:
            return Figure.of([r[key] for r in runs]).fmt(digits)

        splits = ", ".join(" / ".join(map(str, r["split"])) for r in runs)
        first = Figure.of(firsts[name]).fmt(3) if firsts.get(name) else "n/a"
        out.append(
            f"| {name} | {fig('rps', 0)} | {fig('p99', 2)} | {fig('cpu_ms', 3)} | "
            f"{splits} | {first} | {sum(r['errors'] for r in runs)} |"
        )
    for name, why in failed.items():
        out.append(f"| {name} | failed: {why} | | | | | |")
    out += [
        "",
        f"Load average at the end: {' '.join(Path('/proc/loadavg').read_text().split()[:3])}.",
        "",
        "Why `make run` uses `reuseport` (`python -m gateway.launch`): it spreads connections like granian "
        "does, where `uvicorn --workers` can split them 58 / 6 or 61 / 3 (bench/TAIL.md). Its CPU per "
        "request is within the noise of granian's on this box. It also keeps `gateway.serving`'s guarded "
        "protocol, with the request-head and body timeouts and the per-worker connection cap (issue 13). "
        "granian has a header timeout but neither of the other two. granian would have to be clearly "
        "cheaper per request to be worth losing those, and a new dependency.",
        "",
    ]
    return "\n".join(out)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--seconds", type=float, default=8)
    p.add_argument("--connections", type=int, default=64)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--servers", default=",".join(servers.SERVERS))
    p.add_argument("--output", default=str(BENCH / "SERVERS.md"))
    args = p.parse_args()
    os.chdir(ROOT)
    workdir = BENCH / "out" / ("servers-" + dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ"))
    workdir.mkdir(parents=True, exist_ok=True)
    nginx_port, paced_port = procs.free_port(), procs.free_port()
    nginx = nginx_mock.start(workdir, nginx_port)
    paced = subprocess.Popen(
        [sys.executable, str(BENCH / "harness" / "paced_sse.py"), "--port", str(paced_port)],
        stdout=subprocess.DEVNULL,
        start_new_session=True,
    )
    procs.wait_port(paced_port, paced, "paced SSE server")
    up = servers.Upstreams(nginx_port, paced_port)
    headers = {"authorization": f"Bearer {servers.PLAIN_KEY}"}
    chat = payloads.dumps(payloads.chat_body("bench-chat"))
    stream = payloads.dumps(payloads.chat_body("bench-stream", stream=True))
    body = workdir / "chat.json"
    body.write_bytes(chat)
    script = wrk.write_script(workdir / "chat.lua", [wrk.WrkRequest("/v1/chat/completions", body, headers)])
    gws: dict[str, servers.Gateway] = {}
    failed: dict[str, str] = {}
    try:
        for name in args.servers.split(","):
            extra = granian_path() if name == "granian" else ""
            if extra is None:
                failed[name] = "granian could not be installed"
                continue
            try:
                gws[name] = start(workdir, up, name, args.workers, extra)
            except SystemExit as exc:
                failed[name] = str(exc)
                continue
            why = check(gws[name], chat, stream, headers)
            if why:
                failed[name] = why
                procs.stop(gws.pop(name).proc)
        rows: dict[str, list[dict]] = {n: [] for n in gws}
        firsts: dict[str, list[float]] = {n: [] for n in gws}
        for run in range(args.runs):
            for name, gw in gws.items():
                row = measure(gw, script, args)
                rows[name].append(row)
                first, _ = asyncio.run(
                    stream_client.measure(gw.port, "/v1/chat/completions", stream, headers, 25)
                )
                firsts[name].append(sorted(first)[len(first) // 2])
                print(
                    f"  run {run + 1} {name:10s} {row['rps']:7.0f} req/s  p99 {row['p99']:6.2f} ms  "
                    f"cpu {row['cpu_ms']:.3f} ms/req  split {row['split']}  first byte {firsts[name][-1]:.3f} ms",
                    flush=True,
                )
    finally:
        for gw in gws.values():
            procs.stop(gw.proc)
        procs.stop(paced)
        procs.stop(nginx)
    text = report(rows, firsts, failed, args)
    Path(args.output).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
