"""Writing ``bench/RESULTS.md`` from a finished run: machine, commands, the targets (met or not,
and why not), the peers side by side (direct, gateway, LiteLLM, Portkey) with the ratios, the
on-vs-off checks of issues 15 and 17, issue 16's image case, capture, memory, soak and profile.

The tables are in ``report_tables.py``, the targets in ``report_targets.py``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from .cases import SYSTEMS
from .report_tables import Tables
from .report_targets import Targets
from .report_util import NA, paired, series

if TYPE_CHECKING:  # pragma: no cover
    from run import Bench


class Report(Tables):
    def __init__(self, bench: Bench) -> None:
        self.b = bench
        check_cases = getattr(bench, "check_cases", [])
        self.cases = {c.key: c for c in bench.cases + check_cases + bench.capture_cases}
        self.main = [c for c in bench.cases]
        self.check_cases = list(check_cases)
        self.streams = {s.key: s for s in bench.streams}
        self.lines: list[str] = []
        self.targets = Targets(self).compute()

    def w(self, line: str = "") -> None:
        self.lines.append(line)

    def peers(self) -> list[str]:
        """The systems that served at least one case of this run, in table order."""
        seen = {s for c in self.main for s in c.results} | {
            s for sc in self.streams.values() for s in sc.first
        }
        return [s for s in SYSTEMS if s in seen and s != "direct"]

    # -- figures used by several sections ---------------------------------------------------------
    def added(self, key: str, system: str, attr: str = "p50", base: str | None = None) -> list[float] | None:
        case = self.cases.get(key)
        if case is None:
            return None
        return paired(series(case, base or case.base, attr), series(case, system, attr))

    def stream_added(self, key: str, system: str, which: str = "first") -> list[float] | None:
        sc = self.streams.get(key)
        if sc is None:
            return None
        data = sc.first if which == "first" else sc.total
        return paired(data.get("direct"), data.get(system))

    def soak_flat(self) -> tuple[str, bool | None]:
        """Flat = the workers' RSS at the end is within 5 % and 10 MB of the RSS a quarter of the way
        in (the first quarter is warm-up: caches, pools and allocator arenas fill up)."""
        soak = self.b.soak
        samples = soak.get("samples") or []
        if len(samples) < 4:
            return NA + " (soak not run)", None
        sums = [(t, sum(v)) for t, v in samples]
        quarter = next(s for t, s in sums if t >= soak["seconds"] / 4)
        end = sums[-1][1]
        growth = end - quarter
        flat = growth <= 10.0 and growth <= 0.05 * quarter
        return f"{quarter:.1f} → {end:.1f} MB ({growth:+.1f} MB) over {soak['seconds']:.0f} s", flat

    # -- sections ----------------------------------------------------------------------------------
    def header(self) -> None:
        m, a = self.b.meta, self.b.args
        self.w("# Benchmark results")
        self.w()
        self.w(
            f"Run on {m['date']} at commit `{m['git']}` by `make bench` (`bench/run.py`). Every figure is the "
            f"**median of {a.runs} runs**, with the spread (min–max of the runs) in parentheses. Runs of a case "
            "were interleaved (direct, gateway, LiteLLM, Portkey, direct, …) so drift on the box hits all of them "
            "alike." + (f" The run took {m['elapsed_s'] / 60:.0f} minutes." if m.get("elapsed_s") else "")
        )
        if m.get("argv"):
            self.w()
            self.w(
                f"**Not the default run**: `bench/run.py {m['argv']}`. Figures from short or partial runs are "
                "for wiring, not for comparison."
            )
        if m.get("re_rendered"):
            self.w()
            self.w(
                "This page was re-rendered from that run's `results.json` (`bench/run.py --report-only`) by a later "
                "revision of the report code; nothing was measured again."
            )
        self.w()
        self.w("## Machine")
        self.w()
        self.w("| what | value |")
        self.w("| --- | --- |")
        for name, key in (
            ("cores (`nproc`)", "nproc"),
            ("CPU", "cpu"),
            ("memory", "memory"),
            ("kernel", "kernel"),
            ("Python", "python"),
            ("uvicorn", "uvicorn"),
            ("nginx", "nginx"),
            ("wrk", "wrk"),
            ("LiteLLM", "litellm"),
            ("Portkey gateway", "portkey"),
            ("Redis (limits case)", "redis"),
        ):
            self.w(f"| {name} | {m.get(key, NA)} |")
        self.w(
            f"| load average at start / end | {' '.join(m.get('loadavg_start', []))} / "
            f"{' '.join(m.get('loadavg_end', []))} |"
        )
        self.w()
        self.w(
            "**One box for everything.** Everything runs on one 2-core machine: load generator (wrk, one "
            "thread), upstreams (nginx, one worker; the paced SSE server), the gateway (two workers), LiteLLM "
            "(two workers) and Portkey (one Node process); the servers not being measured sit idle. The load "
            "averages above tell whether anything else ran meanwhile. Absolute figures are pessimistic next to a "
            "dedicated load generator; the side-by-side ratios, measured in the same minutes, and the CPU per "
            "request (which does not depend on how the cores were shared) are the robust part."
        )
        self.w()

    def targets_table(self) -> None:
        self.w("## Targets")
        self.w()
        self.w("| issue | target | measured | met |")
        self.w("| --- | --- | --- | --- |")
        for t in self.targets:
            mark = "**yes**" if t.ok else ("**NO**" if t.ok is False else "not measured")
            self.w(f"| {t.issue} | {t.label} | {t.value} | {mark} |")
        self.w()

    def missed(self) -> None:
        """What the data says about each missed target."""
        missed = [t for t in self.targets if t.ok is False]
        if not missed:
            return
        self.w("## Where a target is missed")
        self.w()
        for t in missed:
            self.w(f"- **{t.label}** (issue {t.issue}): measured {t.value}. {t.why}".rstrip())
        self.w()
        if (Path(__file__).resolve().parent.parent / "TAIL.md").exists():
            self.w(
                "The p99 at 64 connections is taken apart in [`TAIL.md`](TAIL.md): garbage-collection pauses "
                "per worker, the split of connections between the workers and each worker's CPU."
            )
            self.w()

    def commands(self) -> None:
        a = self.b.args
        self.w("## Commands")
        self.w()
        self.w("```sh")
        self.w(
            "make bench                     # = .venv/bin/python bench/run.py (defaults: 3 runs, 5 s wrk runs, "
            "64 connections, 10-minute soak)"
        )
        self.w(f".venv/bin/python bench/run.py {self.b.meta.get('argv', '')}".rstrip() + "   # this run")
        self.w("```")
        self.w()
        self.w("What runs:")
        self.w()
        self.w(
            "- **direct**: the upstream itself. nginx (Debian's, one worker, keep-alive, no log) answers "
            "`POST /v1/chat/completions`, `/v1/responses` and `/v1/messages` with canned JSON via `return 200 '…'`; "
            f"streams come from `bench/harness/paced_sse.py`, a bare asyncio/uvloop server (no framework) that "
            f"writes {a.deltas} Chat deltas {a.interval_ms:g} ms apart on an absolute clock (nginx cannot pace)."
        )
        self.w(
            f"- **gateway**: `python -m gateway.launch --workers {a.workers}` (what `make run` uses: uvicorn "
            "workers on uvloop with the guarded httptools protocol of `gateway.serving`, one SO_REUSEPORT socket "
            "each, no uvicorn access log, lifespan on; until 2026-12-07 the bench passed `--http httptools`, "
            "uvicorn's plain protocol, without the client timeouts and connection cap), SQLite in a throwaway data directory, no Redis, configured with "
            "`manage.py loadconfig` (`bench/harness/servers.py`), request logs on (the default), capture off unless "
            "the case says otherwise, the access line off (`GATEWAY_LOG_LEVEL=WARNING`)."
        )
        self.w(
            f"- **LiteLLM**: its proxy from PyPI in `bench/.venv-litellm` (version pinned, see "
            f"`bench/harness/tools.py`), `litellm --config … --num_workers {a.workers}`, `openai/bench-model` with "
            "`api_base` at the same nginx / paced server, a master key, the local cost map."
        )
        self.w(
            "- **Portkey**: `@portkey-ai/gateway` from npm in `bench/.portkey` (pinned with its lock file in "
            "`bench/portkey/`), `NODE_ENV=production node node_modules/@portkey-ai/gateway/build/start-server.js "
            "--port=N --headless`: **one Node process** (it has no worker option, so it can use one core where the "
            "gateway and LiteLLM have two workers; compare CPU per request as well as req/s). Routed per request "
            "by `x-portkey-provider: openai` (or `anthropic`) and `x-portkey-custom-host: http://127.0.0.1:PORT/v1`; "
            "it authenticates no client (the gateway and LiteLLM check a key on every request)."
        )
        self.w(
            f"- **load**: wrk, one thread, {a.seconds:g} s per run, Lua scripts for the POST bodies "
            "(`bench/harness/wrk.py`); latency percentiles are wrk's. Streams are timed by "
            "`bench/harness/stream_client.py` (raw socket + httptools, one keep-alive connection, "
            f"{a.stream_requests} streams per run): *first byte* is the first byte of the response body."
        )
        self.w(
            "- **added latency** = system − direct (or − the check's baseline), per run (runs are paired), then "
            "the median of the runs. **CPU ms/req** = the server processes' user+system CPU during the run ÷ "
            "requests served (uvicorn workers for the gateway and LiteLLM, the node process for Portkey)."
        )
        self.w()

    def render(self) -> str:
        self.header()
        self.targets_table()
        self.missed()
        self.commands()
        self.peers_table()
        self.latency_table()
        self.throughput_table()
        self.stream_table()
        self.checks_table()
        self.images_section()
        if getattr(self.b, "many", None):
            from .many_streams import markdown

            self.w(markdown(self.b.many))
        self.capture_table()
        self.memory_table()
        self.soak_section()
        self.profile_section()
        return "\n".join(self.lines) + "\n"


def write_report(path: Path, bench: Any) -> None:
    path.write_text(Report(bench).render())
