"""CPU per request of the gateway's own code on the /v1 hot path, in one process, no HTTP server.

The proxy's ASGI app (``gateway.asgi.proxy_app``, the production assembly: recorders, request
logs, metrics) is called directly with a prepared scope, N non-stream requests one after the
other, against the canned nginx upstream of ``make bench``. The figure is the process's CPU time
(every thread: the event loop and the request-log writer, drained before the clock stops)
divided by N. Without uvicorn, wrk and cross-process wake-ups it is much steadier than a
server-level figure on a busy machine; it leaves out what the ASGI server itself costs.

    .venv/bin/python bench/hotpath_cpu.py [--requests 3000] [--runs 5] [--cases chat,chain]
        [--baseline DIR]

It also counts the Python function calls per request on the loop thread (cProfile, a separate
run): a deterministic figure that load on the machine cannot blur.

``--baseline DIR`` runs the same measurement from another checkout (``git archive REV | tar -x
-C DIR``), alternating child processes (baseline, this tree, this tree, baseline, ...); the
minimum over the runs is reported beside the median (load on a shared machine only adds).
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# case: (model, body factory, capture on: the key with capture mode ``all``)
CASES = {
    "chat": ("bench-chat", "chat_body", False),
    "chain": ("bench-chain", "chain_body", False),
    "chain-body": ("bench-chat", "chain_body", False),  # the chain's body without the chain
    "capture": ("bench-chat", "chat_body", True),
}


def switches() -> int:
    """Voluntary context switches of every thread of this process so far: a thread woken per
    request (and the GIL hand-over with it) shows here, whatever the load."""
    total = 0
    for task in Path("/proc/self/task").glob("*"):
        try:
            for line in (task / "status").read_text().splitlines():
                if line.startswith("voluntary_ctxt_switches:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return total


def _setup(args: argparse.Namespace) -> tuple[bytes, dict]:
    """Django on a throwaway SQLite database configured like ``make bench``; the request body
    and ASGI scope of the case."""
    root = Path(args.root).resolve()
    os.chdir(root)
    sys.path.insert(0, str(root))
    data = Path(tempfile.mkdtemp(prefix="gw-hotpath-"))
    os.environ.update(
        {
            "DJANGO_SETTINGS_MODULE": "gateway.settings",
            "GATEWAY_DATA_DIR": str(data),
            "DATABASE_URL": f"sqlite:///{data / 'bench.sqlite3'}",
            "SECRET_KEY": secrets.token_urlsafe(40),
            "LOG_LEVEL": "WARNING",
            "GATEWAY_LOG_LEVEL": "WARNING",
        }
    )
    for name in ("REDIS_URL", "PROMETHEUS_MULTIPROC_DIR"):
        os.environ.pop(name, None)
    import django

    django.setup()
    from django.core.management import call_command

    from bench.harness import payloads, servers

    call_command("migrate", verbosity=0)
    model, factory, capture = CASES[args.case]
    config = data / "config.json"
    config.write_text(
        json.dumps(servers.gateway_config(servers.Upstreams(args.port, args.port), capture=capture))
    )
    with open(os.devnull, "w") as devnull:
        call_command("loadconfig", str(config), stdout=devnull)
    body = payloads.dumps(getattr(payloads, factory)(model))
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/v1/chat/completions",
        "raw_path": b"/v1/chat/completions",
        "query_string": b"",
        "root_path": "",
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
        "headers": [
            (b"host", b"127.0.0.1:8000"),
            (b"content-type", b"application/json"),
            (b"authorization", f"Bearer {servers.CAPTURE_KEY if capture else servers.PLAIN_KEY}".encode()),
            (b"content-length", str(len(body)).encode()),
        ],
    }
    return body, scope


def child(args: argparse.Namespace) -> None:
    """One measurement in this process, with the source tree ``args.root`` (printed as JSON)."""
    body, scope = _setup(args)
    import uvloop

    from captures.sink import writer as capture_writer
    from gateway.asgi import proxy_app
    from requestlogs.sink import writer

    statuses: list[int] = []

    async def receive() -> dict:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict) -> None:
        if message["type"] == "http.response.start":
            statuses.append(message["status"])

    async def main() -> dict:
        await proxy_app.startup()
        for _ in range(300):
            await proxy_app(dict(scope), receive, send)
        writer.flush(30)
        capture_writer.flush(30)
        statuses.clear()
        profiler = None
        if args.calls:  # deterministic: Python-level calls per request on the loop thread
            import cProfile

            profiler = cProfile.Profile()
            profiler.enable()
        cpu0, loop0, sw0 = time.process_time(), time.thread_time(), switches()
        for _ in range(args.requests):
            await proxy_app(dict(scope), receive, send)
        loop = time.thread_time() - loop0
        calls = 0.0
        if profiler is not None:
            import pstats

            profiler.disable()
            stats = pstats.Stats(profiler)
            calls = stats.total_calls / args.requests  # type: ignore[attr-defined]
            if args.calls > 1:
                stats.sort_stats("tottime").print_stats(args.calls)
        writer.flush(30)
        capture_writer.flush(30)
        cpu = time.process_time() - cpu0
        sw = switches() - sw0
        await proxy_app.shutdown()
        bad = [s for s in statuses if s != 200]
        if bad or len(statuses) != args.requests:
            raise SystemExit(f"unexpected statuses: {bad[:5]} ({len(statuses)} answers)")
        return {
            "cpu_ms": cpu * 1000 / args.requests,
            "loop_ms": loop * 1000 / args.requests,
            "calls": calls,
            "switches": sw / args.requests,
        }

    print("HOTPATH " + json.dumps(uvloop.run(main())), flush=True)


def run_child(root: Path, case: str, port: int, requests: int, calls: int = 0) -> dict:
    out = subprocess.run(
        [
            sys.executable,
            str(Path(__file__).resolve()),
            "--child",
            "--root",
            str(root),
            "--case",
            case,
            "--port",
            str(port),
            "--requests",
            str(requests),
            "--calls",
            str(calls),
        ],
        capture_output=True,
        text=True,
    )
    line = next((ln for ln in out.stdout.splitlines() if ln.startswith("HOTPATH ")), None)
    if line is None:
        raise SystemExit(f"child failed ({root}): {out.stdout[-800:]} {out.stderr[-1500:]}")
    return json.loads(line[len("HOTPATH ") :])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--cases", default="chat,chain")
    parser.add_argument("--baseline", type=Path, default=None)
    parser.add_argument("--child", action="store_true")
    parser.add_argument("--root", default=str(ROOT))
    parser.add_argument("--case", default="chat")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument(
        "--calls",
        type=int,
        default=0,
        help="count Python calls per request (cProfile; >1: also print that many top functions)",
    )
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    sys.path.insert(0, str(ROOT))
    from bench.harness import nginx_mock, procs

    workdir = Path(tempfile.mkdtemp(prefix="gw-hotpath-nginx-"))
    port = procs.free_port()
    nginx = nginx_mock.start(workdir, port)
    trees = {"this": ROOT}
    if args.baseline is not None:
        trees = {"baseline": args.baseline.resolve(), **trees}
    try:
        for case in args.cases.split(","):
            got: dict[str, list[dict]] = {name: [] for name in trees}
            for run in range(args.runs):
                names = list(trees) if run % 2 == 0 else list(trees)[::-1]
                for name in names:
                    got[name].append(run_child(trees[name], case, port, args.requests))
            for name, root in trees.items():
                calls = run_child(root, case, port, 500, calls=1)["calls"]
                print(
                    f"{case:6s} {name:8s} Python calls per request on the loop thread: {calls:.0f}",
                    flush=True,
                )
            for name, results in got.items():
                cpu = [r["cpu_ms"] for r in results]
                loop = [r["loop_ms"] for r in results]
                sw = [r["switches"] for r in results]
                print(
                    f"{case:6s} {name:8s} CPU ms/req min {min(cpu):.4f} median {statistics.median(cpu):.4f} "
                    f"(loop thread min {min(loop):.4f} median {statistics.median(loop):.4f}; "
                    f"context switches/req {statistics.median(sw):.2f}; "
                    f"runs {' '.join(f'{c:.3f}' for c in cpu)})",
                    flush=True,
                )
    finally:
        procs.stop(nginx)


if __name__ == "__main__":
    main()
