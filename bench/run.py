"""The benchmark suite: the gateway against the direct upstream and against LiteLLM's proxy.

    make bench                                   # everything, 10-minute soak
    .venv/bin/python bench/run.py --soak-seconds 120 --runs 3 --seconds 10

Installs what is missing (nginx and wrk from Debian, LiteLLM in ``bench/.venv-litellm``, py-spy
in the project venv), starts nginx (canned non-stream answers), the paced SSE server (streams),
the gateway (uvicorn, uvloop, httptools, two workers, SQLite, no Redis) and LiteLLM (two
workers) on 127.0.0.1, runs every case ``--runs`` times interleaved (direct, gateway, LiteLLM,
direct, ...) so drift on the shared box hits all three alike, and writes ``bench/RESULTS.md``.
Not part of ``make test``.
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import datetime as dt
import json
import os
import platform
import re
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import SimpleNamespace

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))

from harness import memory, nginx_mock, payloads, procs, profile, servers, stream_client, tools, wrk  # noqa: E402
from harness.report import write_report  # noqa: E402
from harness.stats import Figure  # noqa: E402

SYSTEMS = ("direct", "gateway", "litellm")
ANTHROPIC = {"anthropic-version": "2023-06-01"}


@dataclass
class Case:
    """One row of the report: the same request shape against each system that supports it."""
    key: str
    title: str
    connections: int
    targets: dict[str, wrk.WrkRequest]
    results: dict[str, list[wrk.WrkResult]] = field(default_factory=dict)
    note: str = ""
    settle: bool = False   # wait for the server to go idle before each run, record the wait after it
    drain: dict[str, list[float]] = field(default_factory=dict)
    cpu_ms: dict[str, list[float]] = field(default_factory=dict)   # server workers' CPU per request


@dataclass
class StreamCase:
    key: str
    title: str
    targets: dict[str, tuple[int, str, bytes, dict[str, str]]]
    first: dict[str, list[float]] = field(default_factory=dict)   # per-run p50 first byte
    total: dict[str, list[float]] = field(default_factory=dict)   # per-run p50 total
    first_p99: dict[str, list[float]] = field(default_factory=dict)


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
        self.workdir = BENCH / "out" / stamp
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.ports = {name: procs.free_port() for name in ("nginx", "paced", "gateway", "litellm")}
        self.up = servers.Upstreams(self.ports["nginx"], self.ports["paced"])
        self.gateway = servers.Gateway(self.workdir, self.ports["gateway"], workers=args.workers)
        self.litellm = None if args.skip_litellm else servers.LiteLLM(self.workdir, self.ports["litellm"],
                                                                       workers=args.workers)
        self.nginx: subprocess.Popen | None = None
        self.paced: subprocess.Popen | None = None
        self.cases: list[Case] = []
        self.streams: list[StreamCase] = []
        self.memory: dict[str, dict] = {}
        self.soak: dict = {}
        self.profiles: list[dict] = []
        self.checks: dict[str, str] = {}
        self.meta: dict = {}

    # -- set-up ------------------------------------------------------------------------------------
    def body(self, name: str, obj: dict) -> Path:
        path = self.workdir / f"body-{name}.json"
        path.write_bytes(payloads.dumps(obj))
        return path

    def start(self) -> None:
        self.nginx = nginx_mock.start(self.workdir, self.ports["nginx"])
        self.paced = subprocess.Popen([sys.executable, str(BENCH / "harness" / "paced_sse.py"), "--port",
                                       str(self.ports["paced"]), "--deltas", str(self.args.deltas),
                                       "--interval-ms", str(self.args.interval_ms)],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, start_new_session=True)
        procs.wait_port(self.ports["paced"], self.paced, "paced SSE server")
        self.gateway.prepare(self.up)
        self.gateway.start()
        if self.litellm is not None:
            self.litellm.start(self.up)

    def stop(self) -> None:
        procs.stop(self.litellm.proc if self.litellm else None)
        procs.stop(self.gateway.proc)
        procs.stop(self.paced)
        procs.stop(self.nginx)

    def masters(self) -> dict[str, int]:
        out = {"gateway": self.gateway.proc.pid}
        if self.litellm is not None and self.litellm.proc is not None:
            out["litellm"] = self.litellm.proc.pid
        return out

    def rss(self, label: str) -> None:
        for name, pid in self.masters().items():
            self.memory.setdefault(name, {})[label] = memory.workers_rss(pid)

    # -- the cases ---------------------------------------------------------------------------------
    def define_cases(self) -> None:
        gw = {"authorization": f"Bearer {servers.PLAIN_KEY}"}
        gw_cap = {"authorization": f"Bearer {servers.CAPTURE_KEY}"}
        ll = {"authorization": f"Bearer {servers.LITELLM_KEY}"}
        up = {"authorization": f"Bearer {servers.UPSTREAM_KEY}"}
        chat, msgs, rsp = "/v1/chat/completions", "/v1/messages", "/v1/responses"
        b = self.body
        direct_chat = wrk.WrkRequest(chat, b("direct-chat", payloads.chat_body("bench-model")), up)
        gw_chat = wrk.WrkRequest(chat, b("gw-chat", payloads.chat_body("bench-chat")), gw)
        ll_chat = wrk.WrkRequest(chat, b("ll-chat", payloads.chat_body("bench-chat")), ll)
        direct_chain = wrk.WrkRequest(chat, b("direct-chain", payloads.chain_body("bench-model")), up)
        gw_chain = wrk.WrkRequest(chat, b("gw-chain", payloads.chain_body("bench-chain")), gw)
        gw_msgs = wrk.WrkRequest(msgs, b("gw-msgs", payloads.messages_body("bench-chat")),
                                 {"x-api-key": servers.PLAIN_KEY, **ANTHROPIC})
        ll_msgs = wrk.WrkRequest(msgs, b("ll-msgs", payloads.messages_body("bench-chat")),
                                 {"x-api-key": servers.LITELLM_KEY, **ANTHROPIC})
        direct_large = wrk.WrkRequest(chat, b("direct-large", payloads.large_body("bench-model")), up)
        gw_large = wrk.WrkRequest(chat, b("gw-large", payloads.large_body("bench-chat")), gw)
        ll_large = wrk.WrkRequest(chat, b("ll-large", payloads.large_body("bench-chat")), ll)
        direct_rsp = wrk.WrkRequest(rsp, b("direct-rsp", {"model": "bench-model", "input": "hello benchmark"}), up)
        gw_to_rsp = wrk.WrkRequest(chat, b("gw-to-rsp", payloads.chat_body("bench-responses")), gw)
        direct_msgs = wrk.WrkRequest(msgs, b("direct-msgs", payloads.messages_body("bench-model")),
                                     {"x-api-key": servers.UPSTREAM_KEY, **ANTHROPIC})
        gw_to_msgs = wrk.WrkRequest(chat, b("gw-to-msgs", payloads.chat_body("bench-messages")), gw)
        gw_chat_cap = wrk.WrkRequest(chat, b("gw-chat-cap", payloads.chat_body("bench-chat")), gw_cap)
        self.soak_mix = [gw_chat, gw_chain, gw_msgs, gw_large,
                         wrk.WrkRequest(chat, b("gw-stream", payloads.chat_body("bench-stream", stream=True)), gw)]

        with_ll = self.litellm is not None
        for conns in (1, self.args.connections):
            tag = f"{conns} conn"
            self.cases += [
                Case(f"chat-{conns}", f"Chat → Chat, empty chain, {tag}", conns,
                     {"direct": direct_chat, "gateway": gw_chat, **({"litellm": ll_chat} if with_ll else {})}),
                Case(f"chain-{conns}", f"Chat → Chat, five-rule chain, {tag}", conns,
                     {"direct": direct_chain, "gateway": gw_chain},
                     note="LiteLLM has no equivalent of these transforms"),
                Case(f"cross-{conns}", f"Messages client → Chat upstream, {tag}", conns,
                     {"direct": direct_chat, "gateway": gw_msgs, **({"litellm": ll_msgs} if with_ll else {})},
                     note="direct = the Chat upstream the request is translated to"),
                Case(f"large-{conns}", f"Chat → Chat, 50 messages + 10 tools, {tag}", conns,
                     {"direct": direct_large, "gateway": gw_large, **({"litellm": ll_large} if with_ll else {})}),
            ]
        self.cases += [
            Case("to-responses-1", "Chat client → Responses upstream, 1 conn", 1,
                 {"direct": direct_rsp, "gateway": gw_to_rsp}),
            Case("to-messages-1", "Chat client → Messages upstream, 1 conn", 1,
                 {"direct": direct_msgs, "gateway": gw_to_msgs}),
        ]
        self.capture_cases = [
            Case(f"capture-{conns}", f"Chat → Chat, capture off vs on, {conns} conn", conns,
                 {"gateway": gw_chat, "gateway+capture": gw_chat_cap}, settle=True)
            for conns in (1, self.args.connections)]

        stream_body = payloads.dumps(payloads.chat_body("bench-stream", stream=True))
        msgs_stream = payloads.dumps(payloads.messages_body("bench-stream", stream=True))
        direct_stream = (self.ports["paced"], chat, stream_body, up)
        self.streams = [
            StreamCase("stream-chat", f"Chat → Chat stream ({self.args.deltas} deltas, {self.args.interval_ms:g} ms apart)",
                       {"direct": direct_stream, "gateway": (self.ports["gateway"], chat, stream_body, gw),
                        **({"litellm": (self.ports["litellm"], chat, stream_body, ll)} if with_ll else {})}),
            StreamCase("stream-cross", "Messages client → Chat upstream stream",
                       {"direct": direct_stream,
                        "gateway": (self.ports["gateway"], msgs, msgs_stream,
                                    {"x-api-key": servers.PLAIN_KEY, **ANTHROPIC}),
                        **({"litellm": (self.ports["litellm"], msgs, msgs_stream,
                                        {"x-api-key": servers.LITELLM_KEY, **ANTHROPIC})} if with_ll else {})}),
        ]

    def port_of(self, system: str) -> int:
        return {"direct": self.ports["nginx"], "gateway": self.ports["gateway"], "gateway+capture": self.ports["gateway"],
                "litellm": self.ports["litellm"]}[system]

    def workers_of(self, system: str) -> list[int]:
        """The worker processes whose CPU a run of ``system`` is charged (none for nginx)."""
        if system.startswith("gateway"):
            return procs.worker_pids(self.gateway.proc.pid)
        if system == "litellm" and self.litellm is not None:
            return procs.worker_pids(self.litellm.proc.pid)
        return []

    def check(self, case: Case) -> None:
        """One request per system before timing: 200 and the canned answer's text in the body.
        A system that fails is dropped from the case and the reason goes into the report."""
        for system, req in list(case.targets.items()):
            status, body = asyncio.run(stream_client.fetch(self.port_of(system), req.path, req.body_file.read_bytes(),
                                                           req.headers))
            if status != 200 or b"Echo: hello benchmark" not in body:
                at = max(0, body.find(b"error") - 40)
                self.checks[f"{case.key}/{system}"] = f"HTTP {status}: {body[at:at + 300]!r}"
                print(f"  ! {case.key}/{system}: HTTP {status} {body[:200]!r}", flush=True)
                del case.targets[system]

    def run_case(self, case: Case, sampler_for: str | None = None) -> None:
        self.check(case)
        scripts = {s: wrk.write_script(self.workdir / f"{case.key}-{s}.lua", [r]) for s, r in case.targets.items()}
        workers = procs.worker_pids(self.gateway.proc.pid)
        for run in range(self.args.runs):
            for system in case.targets:
                if case.settle:
                    procs.wait_quiet(workers)
                served_by = self.workers_of(system)
                cpu0 = sum(procs.cpu_seconds(p) for p in served_by)
                res = wrk.run(self.port_of(system), scripts[system], connections=case.connections,
                              seconds=self.args.seconds)
                case.results.setdefault(system, []).append(res)
                if case.settle:
                    case.drain.setdefault(system, []).append(procs.wait_quiet(workers))
                if served_by and res.requests:
                    cpu = sum(procs.cpu_seconds(p) for p in served_by) - cpu0
                    case.cpu_ms.setdefault(system, []).append(cpu * 1000 / res.requests)
                print(f"  {case.key:16s} run {run + 1} {system:16s} {res.rps:9.0f} req/s  p50 {res.p50:7.3f} ms  "
                      f"p99 {res.p99:7.3f} ms  errors {res.errors} non2xx {res.non2xx}", flush=True)

    def run_stream(self, case: StreamCase) -> None:
        for system, (port, path, body, headers) in list(case.targets.items()):
            status, data = asyncio.run(stream_client.fetch(port, path, body, headers))
            if status != 200 or b"tok63 " not in data:
                at = max(0, data.find(b"error") - 40)
                self.checks[f"{case.key}/{system}"] = f"HTTP {status}: {data[at:at + 300]!r}"
                print(f"  ! {case.key}/{system}: HTTP {status} {data[at:at + 200]!r}", flush=True)
                del case.targets[system]
        for run in range(self.args.runs):
            for system, (port, path, body, headers) in case.targets.items():
                first, total = asyncio.run(stream_client.measure(port, path, body, headers, self.args.stream_requests))
                ordered = sorted(first)
                case.first.setdefault(system, []).append(Figure.of(first).median)
                case.total.setdefault(system, []).append(Figure.of(total).median)
                case.first_p99.setdefault(system, []).append(ordered[min(len(ordered) - 1,
                                                                          int(round(0.99 * (len(ordered) - 1))))])
                print(f"  {case.key:16s} run {run + 1} {system:10s} first byte p50 {case.first[system][-1]:7.3f} ms  "
                      f"total p50 {case.total[system][-1]:8.3f} ms", flush=True)

    def run_loaded(self, cases: list[Case]) -> None:
        """The 64-connection cases, sampling every server's RSS while they run."""
        samplers = {name: memory.Sampler(pid) for name, pid in self.masters().items()}
        for s in samplers.values():
            s.__enter__()
        try:
            for case in cases:
                self.run_case(case)
        finally:
            for name, s in samplers.items():
                s.__exit__(None, None, None)
                self.memory.setdefault(name, {})["under load (peak)"] = s.peak_per_worker

    def set_capture(self, on: bool) -> None:
        self.gateway.configure(self.up, capture=on)
        time.sleep(3)  # config poll is 0.5 s; both workers pick the new snapshot up

    def run_profile(self, case: Case, system: str = "gateway") -> None:
        pyspy = tools.ensure_pyspy()
        if pyspy is None:
            self.profiles.append({"case": case.title, "error": "py-spy could not be installed"})
            return
        workers = procs.worker_pids(self.gateway.proc.pid)
        script = wrk.write_script(self.workdir / f"profile-{case.key}.lua", [case.targets[system]])
        seconds = max(3, int(self.args.seconds) - 2)
        outs = [self.workdir / f"profile-{case.key}-{pid}.txt" for pid in workers]
        spies = [profile.record(pyspy, pid, seconds, out) for pid, out in zip(workers, outs, strict=False)]
        time.sleep(0.5)
        res = wrk.run(self.port_of(system), script, connections=case.connections, seconds=self.args.seconds)
        for spy in spies:
            spy.wait(timeout=60)
        for pid, out in zip(workers, outs, strict=False):
            if not out.exists():
                self.profiles.append({"case": case.title, "error": f"py-spy wrote nothing for worker {pid}"})
                continue
            samples, own, incl, comps = profile.top_frames(out)
            self.profiles.append({"case": case.title, "pid": pid, "samples": samples, "rps": res.rps,
                                  "own": own, "inclusive": incl, "components": comps,
                                  "file": str(out.relative_to(ROOT))})

    def run_soak(self) -> None:
        """Back-to-back wrk bursts (each <= 10 s) of a mixed request stream for --soak-seconds,
        the workers' RSS after each burst."""
        if self.args.soak_seconds <= 0:
            return
        # Mostly non-stream traffic (8 rounds of the four shapes) and one paced stream per round trip
        # of the list, so the soak keeps the workers busy instead of waiting on stream pacing.
        script = wrk.write_script(self.workdir / "soak.lua", self.soak_mix, weights=[8, 8, 8, 8, 1])
        procs.wait_quiet(procs.worker_pids(self.gateway.proc.pid))
        burst = min(10.0, self.args.seconds)
        start = time.monotonic()
        samples: list[tuple[float, list[float]]] = [(0.0, memory.workers_rss(self.gateway.proc.pid))]
        requests = errors = non2xx = 0
        rps: list[float] = []
        while time.monotonic() - start < self.args.soak_seconds:
            res = wrk.run(self.ports["gateway"], script, connections=self.args.soak_connections, seconds=burst)
            requests += res.requests
            errors += res.errors
            non2xx += res.non2xx
            rps.append(res.rps)
            samples.append((time.monotonic() - start, memory.workers_rss(self.gateway.proc.pid)))
            print(f"  soak {samples[-1][0]:6.0f}s {res.rps:7.0f} req/s  RSS {sum(samples[-1][1]):6.1f} MB", flush=True)
        self.soak = {"seconds": self.args.soak_seconds, "connections": self.args.soak_connections,
                     "requests": requests, "errors": errors, "non2xx": non2xx, "rps": rps, "samples": samples}

    # -- whole run ---------------------------------------------------------------------------------
    def collect_meta(self) -> None:
        def sh(cmd: str) -> str:
            return subprocess.run(cmd, shell=True, capture_output=True, text=True).stdout.strip()
        self.meta = {
            "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "nproc": sh("nproc"), "cpu": sh("lscpu | sed -n 's/^Model name: *//p' | head -1"),
            "memory": sh("free -h | awk '/^Mem:/ {print $2}'"), "kernel": platform.release(),
            "python": platform.python_version(), "nginx": sh(f"{tools.nginx_binary()} -v 2>&1"),
            "wrk": sh("wrk -v 2>&1 | head -1"), "litellm": tools.litellm_version() if self.litellm else "skipped",
            "uvicorn": sh(f"{sys.executable} -c 'import uvicorn; print(uvicorn.__version__)'"),
            "git": sh(f"git -C {ROOT} rev-parse --short HEAD"),
            "loadavg_start": Path("/proc/loadavg").read_text().split()[:3],
            "capture_sink": capture_sink_state(),
            "args": vars(self.args), "argv": " ".join(sys.argv[1:]),
        }

    def run(self) -> None:
        self.collect_meta()
        print(f"workdir {self.workdir}", flush=True)
        self.start()
        try:
            self.define_cases()
            self.rss("idle")
            one = [c for c in self.cases if c.connections == 1]
            many = [c for c in self.cases if c.connections != 1]
            print("== one connection", flush=True)
            for case in one:
                self.run_case(case)
            print("== streams", flush=True)
            for sc in self.streams:
                self.run_stream(sc)
            print(f"== {self.args.connections} connections", flush=True)
            self.run_loaded(many)
            time.sleep(5)
            self.rss("after load")
            if not self.args.no_profile:
                print("== profile (py-spy)", flush=True)
                self.run_profile(next(c for c in self.cases if c.key == f"chat-{self.args.connections}"))
            print("== capture off vs on", flush=True)
            self.set_capture(True)
            with memory.Sampler(self.gateway.proc.pid) as sampler:
                for case in self.capture_cases:
                    self.run_case(case)
            self.memory["gateway"]["capture on (peak)"] = sampler.peak_per_worker
            self.set_capture(False)
            self.meta["captures"] = capture_counts(self.gateway.workdir)
            print("== soak", flush=True)
            self.run_soak()
            time.sleep(5)
            self.rss("after soak")
            self.meta["loadavg_end"] = Path("/proc/loadavg").read_text().split()[:3]
        finally:
            self.stop()
        raw = self.workdir / "results.json"
        raw.write_text(json.dumps({"meta": self.meta, "cases": [asdict(c) for c in self.cases + self.capture_cases],
                                   "streams": [asdict(s) for s in self.streams], "memory": self.memory,
                                   "soak": self.soak, "profiles": self.profiles, "checks": self.checks},
                                  default=str, indent=1))
        out = Path(self.args.output)
        write_report(out, self)
        print(f"wrote {out} (raw figures: {raw})", flush=True)


def capture_counts(gateway_data: Path) -> dict[str, int]:
    """Captures the writer persisted (rows in the bench database) and the ones it dropped (its
    "capture dropped" log lines), after the capture-on runs."""
    import sqlite3

    out = {"persisted": -1, "dropped": 0}
    try:
        with sqlite3.connect(gateway_data / "bench.sqlite3") as db:
            out["persisted"] = db.execute("SELECT COUNT(*) FROM captures_capture").fetchone()[0]
    except sqlite3.Error:
        pass
    log = gateway_data / "uvicorn.log"
    if log.exists():
        with log.open("rb") as f:
            # One line a second, with the count since the previous line (older builds: one per capture).
            out["dropped"] = sum(int(m.group(1)) if (m := re.search(rb"; (\d+) dropped since the last", line)) else 1
                                 for line in f if b"capture dropped" in line)
    return out


def load_results(path: Path) -> SimpleNamespace:
    """A finished run's ``results.json`` back into the shape ``write_report`` reads, so the report
    can be re-rendered (``--report-only``) without measuring again."""
    data = json.loads(path.read_text())

    def case(d: dict) -> Case:
        results = {k: [wrk.WrkResult(**r) for r in v] for k, v in d.pop("results").items()}
        targets = {k: wrk.WrkRequest(v["path"], Path(v["body_file"]), v["headers"]) for k, v in d.pop("targets").items()}
        return Case(targets=targets, results=results, **d)

    cases = [case(dict(c)) for c in data["cases"]]
    meta = data["meta"]
    args = argparse.Namespace(**meta["args"])
    if "captures" not in meta:
        meta["captures"] = capture_counts(path.parent / "gateway-data")
    meta["re_rendered"] = True
    return SimpleNamespace(
        args=args, meta=meta, cases=[c for c in cases if not c.key.startswith("capture")],
        capture_cases=[c for c in cases if c.key.startswith("capture")],
        streams=[StreamCase(**s) for s in data["streams"]], memory=data["memory"], soak=data["soak"],
        profiles=data["profiles"], checks=data["checks"])


def capture_sink_state() -> str:
    """Whether ``captures.sink.submit`` still does nothing (the capture writer is another
    engineer's work in progress): a body that is only a docstring and ``return None``."""
    try:
        tree = ast.parse((ROOT / "captures" / "sink.py").read_text())
    except OSError:
        return "captures/sink.py missing"
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "submit":
            body = [n for n in node.body if not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))]
            stub = all(isinstance(n, ast.Return) and (n.value is None or (isinstance(n.value, ast.Constant)
                                                                          and n.value.value is None)) for n in body)
            return "no-op stub (submit() returns at once)" if stub else "real writer"
    return "no submit() found"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=3, help="runs per case (median and spread reported); at least 3")
    p.add_argument("--seconds", type=float, default=10, help="length of each wrk run (at most 10 on a shared box)")
    p.add_argument("--connections", type=int, default=64)
    p.add_argument("--workers", type=int, default=2, help="server workers, gateway and LiteLLM alike")
    p.add_argument("--stream-requests", type=int, default=25, help="timed streams per run")
    p.add_argument("--deltas", type=int, default=64)
    p.add_argument("--interval-ms", type=float, default=5.0)
    p.add_argument("--soak-seconds", type=float, default=600, help="soak duration; 0 skips it")
    p.add_argument("--soak-connections", type=int, default=16)
    p.add_argument("--skip-litellm", action="store_true")
    p.add_argument("--no-profile", action="store_true")
    p.add_argument("--no-tail", action="store_true", help="skip the p99 diagnosis (bench/diagnose_tail.py -> bench/TAIL.md)")
    p.add_argument("--no-install", action="store_true", help="do not apt-get / pip install missing tools")
    p.add_argument("--output", default=str(BENCH / "RESULTS.md"))
    p.add_argument("--report-only", metavar="RESULTS_JSON",
                   help="re-render the report from a finished run's results.json, measure nothing")
    args = p.parse_args(argv)
    if args.runs < 3:
        p.error("--runs must be at least 3 (every figure is a median of at least three runs)")
    return args


def main() -> None:
    args = parse_args()
    os.chdir(ROOT)
    if args.report_only:
        write_report(Path(args.output), load_results(Path(args.report_only)))
        print(f"wrote {args.output}")
        return
    if not args.no_install:
        tools.ensure_apt_tools()
        if not args.skip_litellm:
            tools.ensure_litellm()
    Bench(args).run()
    if not args.no_tail:
        print("== tail diagnosis (bench/diagnose_tail.py --compare-freeze)", flush=True)
        subprocess.run([sys.executable, str(BENCH / "diagnose_tail.py"), "--compare-freeze", "--runs", str(args.runs),
                        "--seconds", str(args.seconds), "--connections", str(args.connections),
                        "--workers", str(args.workers), "--output", str(BENCH / "TAIL.md")], check=False)


if __name__ == "__main__":
    main()
