"""The benchmark suite: the gateway against the direct upstream and its peers (LiteLLM's proxy,
the Portkey gateway), the on-vs-off checks of issues 15 and 17, and issue 16's image case.

    make bench                                   # everything, 10-minute soak
    make bench BENCH_ARGS="--quick --only chat"  # a smoke run of the Chat cases, 1 s wrk runs
    .venv/bin/python bench/run.py --soak-seconds 120 --runs 3 --seconds 5

Installs what is missing (nginx, wrk and redis-server from Debian, LiteLLM in
``bench/.venv-litellm``, Portkey from npm in ``bench/.portkey``, py-spy in the project venv),
starts nginx (canned non-stream answers), the paced SSE server (streams), the gateway (uvicorn,
uvloop, httptools, two workers, SQLite, no Redis), LiteLLM (two workers) and Portkey (one Node
process) on 127.0.0.1, runs every case ``--runs`` times interleaved (direct, gateway, LiteLLM,
Portkey, direct, ...) so drift on the shared box hits all of them alike, and writes
``bench/RESULTS.md``. Cases come from the families in ``bench/harness/cases_*.py`` (``FAMILIES``
below). Not part of ``make test``.
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
import shutil
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path
from types import SimpleNamespace

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))

from harness import (  # noqa: E402
    agent_cases,
    cases_checks,
    cases_core,
    cases_server,
    images,
    memory,
    nginx_mock,
    payloads,
    plan,
    procs,
    profile,
    servers,
    stream_client,
    tools,
    wrk,
)
from harness.cases import SYSTEMS, Case, StreamCase  # noqa: E402,F401  (Case/StreamCase: run.Case for callers)
from harness.report import write_report  # noqa: E402
from harness.stats import Figure  # noqa: E402

# The case families, in the order their cases run within each phase; add a module here to add cases.
FAMILIES = (cases_core, agent_cases, cases_checks, cases_server)


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
        self.workdir = BENCH / "out" / stamp
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.ports = {
            name: procs.free_port()
            for name in ("nginx", "paced", "many", "gateway", "litellm", "portkey", "redis")
        }
        self.up = servers.Upstreams(self.ports["nginx"], self.ports["paced"], self.ports["many"])
        self.gateway = servers.Gateway(self.workdir, self.ports["gateway"], workers=args.workers)
        self.litellm = (
            None
            if args.skip_litellm
            else servers.LiteLLM(self.workdir, self.ports["litellm"], workers=args.workers)
        )
        self.portkey = None if args.skip_portkey else servers.Portkey(self.workdir, self.ports["portkey"])
        self.redis: servers.Redis | None = None
        self.servers: dict[str, object] = {"gateway": self.gateway}
        self.variant_env: dict[str, tuple[dict[str, str], bool]] = {}
        self.nginx: subprocess.Popen | None = None
        self.paced: subprocess.Popen | None = None
        self.many: dict = {}  # cases_server: 1,000 concurrent paced streams (harness.many_streams)
        self.cases: list[Case] = []
        self.capture_cases: list[Case] = []
        self.check_cases: list[Case] = []
        self.streams: list[StreamCase] = []
        self.soak_mix: list[wrk.WrkRequest] = []
        self.memory: dict[str, dict] = {}
        self.soak: dict = {}
        self.profiles: list[dict] = []
        self.checks: dict[str, str] = {}
        self.images: dict = {}
        self.figures: dict[str, tuple[str, bool | None]] = {}  # target id -> (measured, met), set by families
        self.extra: dict[str, object] = {}  # a family's own raw figures, saved in results.json
        self.families = FAMILIES
        self.meta: dict = {}

    # -- systems -----------------------------------------------------------------------------------
    def has(self, system: str) -> bool:
        """Whether this bench runs ``system`` at all (peers can be skipped)."""
        return {"litellm": self.litellm, "portkey": self.portkey}.get(system, True) is not None

    def add_variant(self, name: str, env: dict[str, str], *, redis: bool = False) -> None:
        """A gateway variant in its own process (another environment), started only when a selected
        case uses it; ``redis`` gives it ``REDIS_URL`` at a private redis-server."""
        self.variant_env[name] = (env, redis)

    def server_of(self, system: str):
        """The server behind a system name: the longest registered ``+``-prefix of it; None when
        that prefix is a variant that did not start (never the main gateway in its place)."""
        name = system
        while name not in self.servers and name not in self.variant_env and "+" in name:
            name = name.rsplit("+", 1)[0]
        return self.servers.get(name)

    def port_of(self, system: str) -> int:
        if system == "direct":
            return self.ports["nginx"]
        return self.server_of(system).port

    def workers_of(self, system: str) -> list[int]:
        """The processes whose CPU a run of ``system`` is charged (none for nginx): the uvicorn
        workers of the gateway and LiteLLM, Portkey's one node process."""
        server = None if system == "direct" else self.server_of(system)
        return server.pids() if server is not None else []

    def rss(self, label: str) -> None:
        for name in ("gateway", "litellm", "portkey"):
            server = self.servers.get(name)
            if server is not None:
                self.memory.setdefault(name, {})[label] = memory.rss_of(server.pids())
                if label == "idle":  # RSS counts the pages the workers share once per worker
                    self.memory[name]["idle PSS"] = memory.pss_of(server.pids())

    # -- set-up ------------------------------------------------------------------------------------
    def body(self, name: str, obj: dict) -> Path:
        path = self.workdir / f"body-{name}.json"
        path.write_bytes(payloads.dumps(obj))
        return path

    def all_cases(self) -> list[Case]:
        return self.cases + self.check_cases + self.capture_cases

    def used_systems(self) -> set[str]:
        used = {s for c in self.all_cases() for s in c.targets} | {
            s for sc in self.streams for s in sc.targets
        }
        return used | ({"gateway"} if self.want("soak") or self.want("profile") else set())

    def start(self) -> None:
        self.nginx = nginx_mock.start(self.workdir, self.ports["nginx"])
        self.paced = subprocess.Popen(
            [
                sys.executable,
                str(BENCH / "harness" / "paced_sse.py"),
                "--port",
                str(self.ports["paced"]),
                "--deltas",
                str(self.args.deltas),
                "--interval-ms",
                str(self.args.interval_ms),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        procs.wait_port(self.ports["paced"], self.paced, "paced SSE server")
        self.gateway.prepare(self.up)
        self.gateway.start()
        used = self.used_systems()
        for name, peer in (("litellm", self.litellm), ("portkey", self.portkey)):
            if peer is None or name not in used:
                continue
            try:  # a peer that cannot start leaves its cases with the reason; the run goes on
                peer.start(self.up) if name == "litellm" else peer.start()
            except (SystemExit, OSError) as exc:
                self.checks[f"peer/{name}"] = f"did not start: {exc}"
                print(f"  ! {name} did not start: {exc}", flush=True)
                continue
            self.servers[name] = peer
        for name, (env, redis) in self.variant_env.items():
            if any(s == name or s.startswith(name + "+") for s in used):
                self.start_variant(name, env, redis)

    def start_variant(self, name: str, env: dict[str, str], redis: bool) -> None:
        if redis:
            if shutil.which("redis-server") is None:
                self.checks[f"variant/{name}"] = "redis-server is not installed: cases with Redis not run"
                return
            if self.redis is None:
                self.redis = servers.Redis(self.workdir, self.ports["redis"])
                self.redis.start()
            env = {**env, "REDIS_URL": self.redis.url}
        variant = servers.Gateway(
            self.workdir,
            procs.free_port(),
            workers=self.args.workers,
            name=f"{name.replace('+', '-')}-data",
            env=env,
        )
        variant.prepare(self.up)
        variant.start()
        self.servers[name] = variant

    def stop(self) -> None:
        for server in [self.servers.get(n) for n in self.variant_env] + [
            self.portkey,
            self.litellm,
            self.gateway,
            self.redis,
        ]:
            procs.stop(server.proc if server is not None else None)
        procs.stop(self.paced)
        procs.stop(self.nginx)

    # -- the cases ---------------------------------------------------------------------------------
    def want(self, key: str) -> bool:
        """Whether ``--only`` selects this case key (or phase: soak, profile, images, tail)."""
        return self.args.only is None or re.search(self.args.only, key) is not None

    def define_cases(self) -> None:
        for family in self.families:
            family.define(self)
        self.cases = [c for c in self.cases if self.want(c.key)]
        self.check_cases = [c for c in self.check_cases if self.want(c.key)]
        self.capture_cases = [c for c in self.capture_cases if self.want(c.key)]
        self.streams = [s for s in self.streams if self.want(s.key)]

    def drop_unserved(self, case: Case | StreamCase) -> None:
        """A system whose server did not start (a skipped peer, a variant without redis-server)
        leaves the case, with the reason in the report."""
        for system in list(case.targets):
            if system != "direct" and self.server_of(system) is None:
                self.checks[f"{case.key}/{system}"] = (
                    "not run: its server was not started (skipped or unavailable)"
                )
                del case.targets[system]

    def check(self, case: Case) -> None:
        """One request per system before timing: 200 and the canned answer's text in the body.
        A system that fails is dropped from the case and the reason goes into the report."""
        self.drop_unserved(case)
        for system, req in list(case.targets.items()):
            status, body = asyncio.run(
                stream_client.fetch(self.port_of(system), req.path, req.body_file.read_bytes(), req.headers)
            )
            if status != 200 or b"Echo: hello benchmark" not in body:
                at = max(0, body.find(b"error") - 40)
                self.checks[f"{case.key}/{system}"] = f"HTTP {status}: {body[at : at + 300]!r}"
                print(f"  ! {case.key}/{system}: HTTP {status} {body[:200]!r}", flush=True)
                del case.targets[system]

    def run_case(self, case: Case) -> None:
        self.check(case)
        scripts = {
            s: wrk.write_script(self.workdir / f"{case.key}-{s}.lua", [r]) for s, r in case.targets.items()
        }
        if case.section == "check":  # variants are fresh processes: one untimed second each first
            for system in case.targets:
                wrk.run(self.port_of(system), scripts[system], connections=case.connections, seconds=1)
        for run in range(self.args.runs):
            for system in case.targets:
                served_by = self.workers_of(system)
                if case.settle:
                    procs.wait_quiet(served_by)
                cpu0 = sum(procs.cpu_seconds(p) for p in served_by)
                res = wrk.run(
                    self.port_of(system),
                    scripts[system],
                    connections=case.connections,
                    seconds=self.args.seconds,
                )
                case.results.setdefault(system, []).append(res)
                if case.settle:
                    case.drain.setdefault(system, []).append(procs.wait_quiet(served_by))
                if served_by and res.requests:
                    cpu = sum(procs.cpu_seconds(p) for p in served_by) - cpu0
                    case.cpu_ms.setdefault(system, []).append(cpu * 1000 / res.requests)
                print(
                    f"  {case.key:16s} run {run + 1} {system:22s} {res.rps:9.0f} req/s  p50 {res.p50:7.3f} ms  "
                    f"p99 {res.p99:7.3f} ms  errors {res.errors} non2xx {res.non2xx}",
                    flush=True,
                )

    def run_stream(self, case: StreamCase) -> None:
        for system in list(case.targets):
            if system not in ("direct", "gateway") and self.server_of(system) is None:
                self.checks[f"{case.key}/{system}"] = (
                    "not run: its server was not started (skipped or unavailable)"
                )
                del case.targets[system]
        for system, (port, path, body, headers) in list(case.targets.items()):
            status, data = asyncio.run(stream_client.fetch(port, path, body, headers))
            if status != 200 or b"tok63 " not in data:
                at = max(0, data.find(b"error") - 40)
                self.checks[f"{case.key}/{system}"] = f"HTTP {status}: {data[at : at + 300]!r}"
                print(f"  ! {case.key}/{system}: HTTP {status} {data[at : at + 200]!r}", flush=True)
                del case.targets[system]
        for run in range(self.args.runs):
            for system, (port, path, body, headers) in case.targets.items():
                first, total = asyncio.run(
                    stream_client.measure(port, path, body, headers, self.args.stream_requests)
                )
                ordered = sorted(first)
                case.first.setdefault(system, []).append(Figure.of(first).median)
                case.total.setdefault(system, []).append(Figure.of(total).median)
                case.first_p99.setdefault(system, []).append(
                    ordered[min(len(ordered) - 1, int(round(0.99 * (len(ordered) - 1))))]
                )
                print(
                    f"  {case.key:16s} run {run + 1} {system:10s} first byte p50 {case.first[system][-1]:7.3f} ms  "
                    f"total p50 {case.total[system][-1]:8.3f} ms",
                    flush=True,
                )

    def run_loaded(self, cases: list[Case]) -> None:
        """The N-connection cases, sampling every server's RSS while they run."""
        samplers = {
            name: memory.Sampler(self.servers[name].pids)
            for name in ("gateway", "litellm", "portkey")
            if name in self.servers
        }
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
        workers = self.gateway.pids()
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
            self.profiles.append(
                {
                    "case": case.title,
                    "pid": pid,
                    "samples": samples,
                    "rps": res.rps,
                    "own": own,
                    "inclusive": incl,
                    "components": comps,
                    "file": str(out.relative_to(ROOT)),
                }
            )

    def run_soak(self) -> None:
        """Back-to-back wrk bursts (each <= 10 s) of a mixed request stream for --soak-seconds,
        the workers' RSS after each burst."""
        if self.args.soak_seconds <= 0 or not self.want("soak"):
            return
        # Mostly non-stream traffic (8 rounds of the four shapes) and one paced stream per round trip
        # of the list, so the soak keeps the workers busy instead of waiting on stream pacing.
        script = wrk.write_script(self.workdir / "soak.lua", self.soak_mix, weights=[8, 8, 8, 8, 1])
        procs.wait_quiet(self.gateway.pids())
        burst = min(10.0, max(self.args.seconds, 5.0))
        start = time.monotonic()
        samples: list[tuple[float, list[float]]] = [(0.0, memory.rss_of(self.gateway.pids()))]
        requests = errors = non2xx = 0
        rps: list[float] = []
        while time.monotonic() - start < self.args.soak_seconds:
            res = wrk.run(
                self.ports["gateway"], script, connections=self.args.soak_connections, seconds=burst
            )
            requests += res.requests
            errors += res.errors
            non2xx += res.non2xx
            rps.append(res.rps)
            samples.append((time.monotonic() - start, memory.rss_of(self.gateway.pids())))
            print(
                f"  soak {samples[-1][0]:6.0f}s {res.rps:7.0f} req/s  RSS {sum(samples[-1][1]):6.1f} MB",
                flush=True,
            )
        self.soak = {
            "seconds": self.args.soak_seconds,
            "connections": self.args.soak_connections,
            "requests": requests,
            "errors": errors,
            "non2xx": non2xx,
            "rps": rps,
            "samples": samples,
        }

    # -- whole run ---------------------------------------------------------------------------------
    def collect_meta(self) -> None:
        def sh(cmd: str) -> str:
            return subprocess.run(cmd, shell=True, capture_output=True, text=True).stdout.strip()

        self.meta = {
            "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "nproc": sh("nproc"),
            "cpu": sh("lscpu | sed -n 's/^Model name: *//p' | head -1"),
            "memory": sh("free -h | awk '/^Mem:/ {print $2}'"),
            "kernel": platform.release(),
            "python": platform.python_version(),
            "nginx": sh(f"{tools.nginx_binary()} -v 2>&1"),
            "wrk": sh("wrk -v 2>&1 | head -1"),
            "litellm": tools.litellm_version() if self.litellm else "skipped",
            "portkey": (
                f"{tools.portkey_version()} (Node {tools.node_version()})" if self.portkey else "skipped"
            ),
            "redis": sh("redis-server --version | head -1") or "missing",
            "uvicorn": sh(f"{sys.executable} -c 'import uvicorn; print(uvicorn.__version__)'"),
            "git": sh(f"git -C {ROOT} rev-parse --short HEAD"),
            "loadavg_start": Path("/proc/loadavg").read_text().split()[:3],
            "capture_sink": capture_sink_state(),
            "args": vars(self.args),
            "argv": " ".join(sys.argv[1:]),
        }

    def phases(self) -> None:
        """Everything that is measured, in order, with the servers up."""
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
        time.sleep(5 if many else 0)
        self.rss("after load")
        chat_many = next((c for c in self.cases if c.key == f"chat-{self.args.connections}"), None)
        if not self.args.no_profile and chat_many is not None and self.want("profile"):
            print("== profile (py-spy)", flush=True)
            self.run_profile(chat_many)
        print("== checks (issues 15 and 17: on vs off)", flush=True)
        for case in self.check_cases:
            self.run_case(case)
        for family in self.families:  # measurements that are not wrk cases (see harness/cases.py)
            hook = getattr(family, "run_phase", None)
            if hook is not None:
                print(f"== {family.__name__.rsplit('.', 1)[-1]}", flush=True)
                hook(self)
        if self.capture_cases:
            print("== capture off vs on", flush=True)
            self.set_capture(True)
            with memory.Sampler(self.gateway.pids) as sampler:
                for case in self.capture_cases:
                    self.run_case(case)
            self.memory["gateway"]["capture on (peak)"] = sampler.peak_per_worker
            self.set_capture(False)
            self.meta["captures"] = capture_counts(self.gateway.workdir)
        print("== soak", flush=True)
        self.run_soak()
        time.sleep(5 if self.soak else 0)
        self.rss("after soak")

    def run(self) -> None:
        self.collect_meta()
        print(f"workdir {self.workdir}", flush=True)
        self.define_cases()
        started = time.monotonic()
        print(plan.describe(self), flush=True)
        self.start()
        try:
            self.rss("idle")
            self.phases()
            self.meta["loadavg_end"] = Path("/proc/loadavg").read_text().split()[:3]
        finally:
            self.stop()
        if self.want("images") and not self.args.no_images:
            print("== images (issue 16: text p50 under 20 concurrent 4 MP compressions)", flush=True)
            self.images = images.run(self.args, self.workdir)
        self.meta["elapsed_s"] = round(time.monotonic() - started)
        raw = self.workdir / "results.json"
        raw.write_text(
            json.dumps(
                {
                    "meta": self.meta,
                    "cases": [asdict(c) for c in self.all_cases()],
                    "streams": [asdict(s) for s in self.streams],
                    "memory": self.memory,
                    "soak": self.soak,
                    "profiles": self.profiles,
                    "checks": self.checks,
                    "images": self.images,
                    "figures": self.figures,
                    "extra": self.extra,
                    "many_streams": self.many,
                },
                default=str,
                indent=1,
            )
        )
        out = Path(self.args.output)
        write_report(out, self)
        print(f"wrote {out} (raw figures: {raw}) after {self.meta['elapsed_s'] / 60:.1f} min", flush=True)


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
            out["dropped"] = sum(
                int(m.group(1)) if (m := re.search(rb"; (\d+) dropped since the last", line)) else 1
                for line in f
                if b"capture dropped" in line
            )
    return out


def load_results(path: Path) -> SimpleNamespace:
    """A finished run's ``results.json`` back into the shape ``write_report`` reads, so the report
    can be re-rendered (``--report-only``) without measuring again."""
    data = json.loads(path.read_text())

    def case(d: dict) -> Case:
        results = {k: [wrk.WrkResult(**r) for r in v] for k, v in d.pop("results").items()}
        targets = {
            k: wrk.WrkRequest(v["path"], Path(v["body_file"]), v["headers"])
            for k, v in d.pop("targets").items()
        }
        c = Case(targets=targets, results=results, **d)
        if "section" not in d and c.key.startswith("capture"):  # results.json from before sections
            c.section, c.base = "capture", "gateway"
        return c

    cases = [case(dict(c)) for c in data["cases"]]
    meta = data["meta"]
    args = argparse.Namespace(**{**vars(parse_args([])), **meta["args"]})
    if "captures" not in meta:
        meta["captures"] = capture_counts(path.parent / "gateway-data")
    meta["re_rendered"] = True
    return SimpleNamespace(
        args=args,
        meta=meta,
        cases=[c for c in cases if c.section == "main"],
        capture_cases=[c for c in cases if c.section == "capture"],
        check_cases=[c for c in cases if c.section == "check"],
        streams=[StreamCase(**s) for s in data["streams"]],
        memory=data["memory"],
        soak=data["soak"],
        profiles=data["profiles"],
        checks=data["checks"],
        images=data.get("images", {}),
        figures={k: tuple(v) for k, v in data.get("figures", {}).items()},
        extra=data.get("extra", {}),
        many=data.get("many_streams", {}),
    )


def capture_sink_state() -> str:
    """Whether ``captures.sink.submit`` still does nothing (the capture writer is another
    engineer's work in progress): a body that is only a docstring and ``return None``."""
    try:
        tree = ast.parse((ROOT / "captures" / "sink.py").read_text())
    except OSError:
        return "captures/sink.py missing"
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "submit":
            body = [
                n for n in node.body if not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))
            ]
            stub = all(
                isinstance(n, ast.Return)
                and (n.value is None or (isinstance(n.value, ast.Constant) and n.value.value is None))
                for n in body
            )
            return "no-op stub (submit() returns at once)" if stub else "real writer"
    return "no submit() found"


QUICK = {
    "seconds": 1.0,
    "runs": 3,
    "soak_seconds": 0.0,
    "stream_requests": 5,
    "image_seconds": 2.0,
    "no_profile": True,
    "no_tail": True,
    "many_streams": 100,
    "many_ramp": 2.0,
    "many_deltas": 20,
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--runs", type=int, default=3, help="runs per case (median and spread reported); at least 3"
    )
    p.add_argument(
        "--seconds", type=float, default=5, help="length of each wrk run (at most 10 on a shared box)"
    )
    p.add_argument("--connections", type=int, default=64)
    p.add_argument("--workers", type=int, default=2, help="server workers, gateway and LiteLLM alike")
    p.add_argument("--stream-requests", type=int, default=25, help="timed streams per run")
    p.add_argument("--deltas", type=int, default=64)
    p.add_argument("--interval-ms", type=float, default=5.0)
    p.add_argument(
        "--many-streams", type=int, default=1000, help="concurrent paced streams (0 skips the phase)"
    )
    p.add_argument("--many-ramp", type=float, default=10.0, help="seconds over which those streams start")
    p.add_argument("--many-deltas", type=int, default=100)
    p.add_argument("--many-interval-ms", type=float, default=200.0)
    p.add_argument("--soak-seconds", type=float, default=600, help="soak duration; 0 skips it")
    p.add_argument("--soak-connections", type=int, default=16)
    p.add_argument(
        "--image-seconds", type=float, default=8, help="length of each image-case phase (issue 16)"
    )
    p.add_argument(
        "--only",
        metavar="PATTERN",
        help="run only the cases whose key matches this regular expression (e.g. 'chat', '^logs-', "
        "'portkey' never matches: keys name shapes); the phases soak, profile, images and tail "
        "run only when the pattern matches their name",
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help="smoke run: 1 s wrk runs, 3 runs, 5 streams, no soak, profile or tail diagnosis, short "
        "image case (explicit options win)",
    )
    p.add_argument(
        "--list", action="store_true", help="print the case keys and phases --only can select, and exit"
    )
    p.add_argument("--skip-litellm", action="store_true")
    p.add_argument("--skip-portkey", action="store_true")
    p.add_argument("--no-profile", action="store_true")
    p.add_argument("--no-images", action="store_true", help="skip the issue 16 image case")
    p.add_argument(
        "--no-tail",
        action="store_true",
        help="skip the p99 diagnosis (bench/diagnose_tail.py -> bench/TAIL.md)",
    )
    p.add_argument(
        "--no-install", action="store_true", help="do not apt-get / pip / npm install missing tools"
    )
    p.add_argument("--output", default=str(BENCH / "RESULTS.md"))
    p.add_argument(
        "--report-only",
        metavar="RESULTS_JSON",
        help="re-render the report from a finished run's results.json, measure nothing",
    )
    args = p.parse_args(argv)
    if args.quick:
        given = {
            a.lstrip("-").split("=")[0].replace("-", "_")
            for a in (argv if argv is not None else sys.argv[1:])
        }
        for name, value in QUICK.items():
            if name not in given:
                setattr(args, name, value)
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
    if args.list:
        bench = Bench(args)
        bench.define_cases()
        for c in bench.cases + bench.check_cases + bench.capture_cases + bench.streams:
            print(f"{c.key:18s} {c.title}  [{', '.join(c.targets)}]")
        print(
            "phases: profile soak images tail"
            + "".join(f" {f.__name__.rsplit('.', 1)[-1]}" for f in bench.families if hasattr(f, "run_phase"))
        )
        shutil.rmtree(bench.workdir, ignore_errors=True)
        return
    if not args.no_install:
        tools.ensure_apt_tools()
        if not args.skip_litellm:
            tools.ensure_litellm()
        if not args.skip_portkey:
            tools.ensure_portkey()
    bench = Bench(args)
    bench.run()
    if not args.no_tail and bench.want("tail"):
        print("== tail diagnosis (bench/diagnose_tail.py --compare-threshold)", flush=True)
        subprocess.run(
            [
                sys.executable,
                str(BENCH / "diagnose_tail.py"),
                "--compare-threshold",
                "--runs",
                str(args.runs),
                "--seconds",
                str(args.seconds),
                "--connections",
                str(args.connections),
                "--workers",
                str(args.workers),
                "--output",
                str(BENCH / "TAIL.md"),
            ],
            check=False,
        )


if __name__ == "__main__":
    main()
