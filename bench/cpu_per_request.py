"""CPU time per request of the gateway's workers on the /v1 hot path (non-stream).

Starts nginx (the canned upstream) and the gateway exactly as ``make bench`` does
(``bench/harness/servers.py``: uvicorn, uvloop, httptools, N workers, SQLite, ``loadconfig``),
then for each case drives wrk for a few seconds and charges the workers' utime + stime (from
/proc) to the requests served. Unlike req/s, CPU per request does not depend on how much of the
shared cores the gateway got, so it is the figure to compare before/after a change on a busy box.

    .venv/bin/python bench/cpu_per_request.py [--seconds 5] [--runs 3] [--workers 2]
        [--cases chat-1,chat-64,chain-1,chain-64] [--profile chat-64] [--env NAME=VALUE ...]
        [--baseline DIR]

``--baseline DIR`` starts a second gateway from another checkout (``git archive REV | tar -x -C
DIR``) on the same upstream and interleaves the runs (baseline, this tree, this tree, baseline,
...): on a shared machine the load drifts between minutes, and only figures taken side by side
compare. ``--baseline-env`` passes knobs to the baseline only (``--baseline . --baseline-env
GATEWAY_REQUEST_LOGS=0`` compares request logs off with on, in one tree). ``--profile CASE``
records one worker of this tree with py-spy during that case's first run and prints the top
frames. ``--env`` passes knobs to the gateways (e.g.
``GATEWAY_LOG_LEVEL=INFO`` to include the access line, which ``make bench`` leaves off).

The event loop runs on each worker's main thread; the writer threads (request logs, captures) run
beside it, so the split between the two is printed as well.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.harness import agent_payloads, nginx_mock, payloads, procs, servers, wrk  # noqa: E402
from bench.harness import profile as pyspy_profile  # noqa: E402

CASES = {  # key -> (model, body factory, connections)
    "chat-1": ("bench-chat", payloads.chat_body, 1),
    "chat-64": ("bench-chat", payloads.chat_body, 64),
    "chain-1": ("bench-chain", payloads.chain_body, 1),
    "chain-64": ("bench-chain", payloads.chain_body, 64),
    "cross-1": ("bench-chat", payloads.messages_body, 1),
    # issue 17: the key with never-refusing limits; run with --env REDIS_URL=... for the Redis limiter
    "limits-1": ("bench-chat", payloads.chat_body, 1),
    # issue 20: the 1 MB agent bodies of ``make bench`` (Claude Code -> Chat, Codex -> Responses)
    "agent-msgs-1": ("bench-chat", agent_payloads.claude_code_messages_body, 1),
    "agent-rsp-1": ("bench-responses", agent_payloads.codex_responses_body, 1),
}
PATHS = {"cross-1": "/v1/messages", "agent-msgs-1": "/v1/messages", "agent-rsp-1": "/v1/responses"}
KEYS = {"limits-1": servers.LIMITS_KEY}  # the case's API key when not the plain one


class TreeGateway(servers.Gateway):
    """``servers.Gateway`` run from another source tree (the baseline checkout)."""

    def __init__(self, root: Path, workdir: Path, port: int, workers: int) -> None:
        super().__init__(workdir, port, workers)
        self.root = root

    def manage(self, *args: str) -> None:
        subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=self.root,
            env=self.env,
            check=True,
            stdout=subprocess.DEVNULL,
        )

    def start(self) -> None:
        log = (self.workdir / "uvicorn.log").open("wb")
        self.proc = subprocess.Popen(
            self.command(),
            cwd=self.root,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        procs.wait_port(self.port, self.proc, "gateway")
        time.sleep(2)


def _pyspy() -> str | None:
    for candidate in (Path(sys.executable).parent / "py-spy", Path("/tmp/pyspy-hotpath/bin/py-spy")):
        if candidate.exists():
            return str(candidate)
    return None


class Series:
    """One gateway's runs of one case: CPU ms/req (all threads, loop thread, others), req/s, p50."""

    def __init__(self) -> None:
        self.cpu: list[float] = []
        self.loop: list[float] = []
        self.other: list[float] = []
        self.rps: list[float] = []
        self.p50: list[float] = []

    def line(self) -> str:
        med = statistics.median
        return (
            f"CPU ms/req {med(self.cpu):.4f} (runs {' '.join(f'{c:.3f}' for c in self.cpu)}; loop thread "
            f"{med(self.loop):.4f}, other threads {med(self.other):.4f})  req/s {med(self.rps):6.0f}  "
            f"p50 {med(self.p50):.3f} ms"
        )


def one_run(
    gw: servers.Gateway, script: Path, conns: int, seconds: float, series: Series, spy_out: Path | None = None
) -> None:
    workers = procs.worker_pids(gw.proc.pid)
    spy = None
    if spy_out is not None and (exe := _pyspy()):
        spy = pyspy_profile.record(exe, workers[0], int(seconds), spy_out)
    main0, other0 = procs.thread_cpu(workers)
    res = wrk.run(gw.port, script, connections=conns, seconds=seconds)
    main1, other1 = procs.thread_cpu(workers)
    if res.errors or res.non2xx or not res.requests:
        raise SystemExit(f"{script.name}: {res.errors} errors, {res.non2xx} non-2xx")
    series.loop.append((main1 - main0) * 1000 / res.requests)
    series.other.append((other1 - other0) * 1000 / res.requests)
    series.cpu.append(series.loop[-1] + series.other[-1])
    series.rps.append(res.rps)
    series.p50.append(res.p50)
    if spy is not None:
        spy.wait()
        _print_profile(spy_out)


def measure(gateways: dict[str, servers.Gateway], key: str, workdir: Path, args: argparse.Namespace) -> None:
    model, factory, conns = CASES[key]
    body_file = workdir / f"{key}.json"
    body_file.write_bytes(payloads.dumps(factory(model)))
    script = wrk.write_script(
        workdir / f"{key}.lua",
        [
            wrk.WrkRequest(
                PATHS.get(key, "/v1/chat/completions"),
                body_file,
                {
                    "Authorization": f"Bearer {KEYS.get(key, servers.PLAIN_KEY)}",
                    "anthropic-version": "2023-06-01",
                },
            )
        ],
    )
    names = list(gateways)
    for gw in gateways.values():
        # warm-up, and a gateway still starting (its first snapshot) on a busy box: until it answers
        for _ in range(60):
            if wrk.run(gw.port, script, connections=conns, seconds=1).requests:
                break
    series = {name: Series() for name in names}
    for run in range(args.runs):
        order = names if run % 2 == 0 else names[::-1]
        for name in order:
            spy_out = (
                workdir / f"profile-{key}.txt"
                if args.profile == key and run == 0 and name == "this"
                else None
            )
            one_run(gateways[name], script, conns, args.seconds, series[name], spy_out)
    for name in names:
        print(f"{key:9s} {name:8s} {series[name].line()}", flush=True)
    if len(names) == 2:
        diffs = [a - b for a, b in zip(series["this"].cpu, series["baseline"].cpu, strict=True)]
        print(
            f"{key:9s} this - baseline, paired by run: median {statistics.median(diffs):+.4f} ms/req",
            flush=True,
        )


def _print_profile(raw: Path) -> None:
    if not raw.exists():
        print(f"  (no profile at {raw})")
        return
    samples, own, incl, comp = pyspy_profile.top_frames(raw, 25)
    print(f"  profile: {samples} samples ({raw})")
    print("  components: " + ", ".join(f"{name} {pct:.1f}%" for name, pct in comp))
    for frame, pct in own:
        print(f"    own {pct:5.1f}%  {frame}")
    for frame, pct in incl:
        print(f"    incl {pct:5.1f}%  {frame}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--cases", default="chat-1,chat-64,chain-1,chain-64")
    parser.add_argument("--profile", default="")
    parser.add_argument("--env", action="append", default=[])
    parser.add_argument("--baseline", type=Path, default=None)
    parser.add_argument("--baseline-env", action="append", default=[])
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="gw-cpu-"))
    up = servers.Upstreams(nginx_port=procs.free_port(), paced_port=procs.free_port())
    nginx = nginx_mock.start(workdir, up.nginx_port)
    gateways: dict[str, servers.Gateway] = {}
    if args.baseline is not None:
        gateways["baseline"] = TreeGateway(
            args.baseline.resolve(), workdir / "baseline", procs.free_port(), args.workers
        )
    gateways["this"] = TreeGateway(ROOT, workdir / "this", procs.free_port(), args.workers)
    try:
        for gw in gateways.values():
            for item in args.env + (args.baseline_env if gw is gateways.get("baseline") else []):
                name, _, value = item.partition("=")
                gw.env[name] = value
            gw.prepare(up)
            gw.start()
        for key in args.cases.split(","):
            measure(gateways, key, workdir, args)
    finally:
        for gw in gateways.values():
            procs.stop(gw.proc)
        procs.stop(nginx)


if __name__ == "__main__":
    main()
