"""Writing ``bench/RESULTS.md`` from a finished run: machine, commands, every case side by side
(direct, gateway, LiteLLM) with the ratios, and whether each target was met."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from .stats import Figure

if TYPE_CHECKING:  # pragma: no cover
    from run import Bench, Case

NA = "n/a"


def _fig(values: list[float] | None, digits: int = 2) -> str:
    return Figure.of(values).fmt(digits) if values else NA


def _med(values: list[float] | None) -> float | None:
    return Figure.of(values).median if values else None


def _paired(a: list[float] | None, b: list[float] | None) -> list[float] | None:
    """Per-run differences b - a (runs were interleaved, so run i of each saw the same box)."""
    if not a or not b:
        return None
    return [y - x for x, y in zip(a, b, strict=False)]


def _ratio(num: float | None, den: float | None, digits: int = 1) -> str:
    if num is None or den is None or den == 0:
        return NA
    return f"{num / den:.{digits}f}×"


def _series(case: Case, system: str, attr: str) -> list[float] | None:
    runs = case.results.get(system)
    return [getattr(r, attr) for r in runs] if runs else None


def _errors(case: Case) -> str:
    bad = {s: (sum(r.errors for r in runs), sum(r.non2xx for r in runs)) for s, runs in case.results.items()}
    bad = {s: v for s, v in bad.items() if v != (0, 0)}
    return "; ".join(f"{s}: {e} socket errors, {n} non-2xx" for s, (e, n) in bad.items())


class Report:
    def __init__(self, bench: Bench) -> None:
        self.b = bench
        self.cases = {c.key: c for c in bench.cases + bench.capture_cases}
        self.streams = {s.key: s for s in bench.streams}
        self.lines: list[str] = []
        self.targets: list[tuple[str, str, bool | None]] = []

    def w(self, line: str = "") -> None:
        self.lines.append(line)

    # -- figures used by several sections ---------------------------------------------------------
    def added(self, key: str, system: str, attr: str = "p50") -> list[float] | None:
        case = self.cases.get(key)
        if case is None:
            return None
        return _paired(_series(case, "direct", attr), _series(case, system, attr))

    def stream_added(self, key: str, system: str, which: str = "first") -> list[float] | None:
        sc = self.streams.get(key)
        if sc is None:
            return None
        series = sc.first if which == "first" else sc.total
        return _paired(series.get("direct"), series.get(system))

    # -- sections ----------------------------------------------------------------------------------
    def header(self) -> None:
        m, a = self.b.meta, self.b.args
        self.w("# Benchmark results")
        self.w()
        self.w(f"Run on {m['date']} at commit `{m['git']}` by `make bench` (`bench/run.py`). Every figure is the "
               f"**median of {a.runs} runs**, with the spread (min–max of the runs) in parentheses. Runs of a case "
               "were interleaved (direct, gateway, LiteLLM, direct, …) so drift on the box hits all of them alike.")
        if m.get("re_rendered"):
            self.w()
            self.w("This page was re-rendered from that run's `results.json` (`bench/run.py --report-only`) by a later "
                   "revision of the report code; nothing was measured again. The capture counts were read from the "
                   "run's gateway database and log afterwards.")
        self.w()
        self.w("## Machine")
        self.w()
        self.w("| what | value |")
        self.w("| --- | --- |")
        for label, key in (("cores (`nproc`)", "nproc"), ("CPU", "cpu"), ("memory", "memory"), ("kernel", "kernel"),
                           ("Python", "python"), ("uvicorn", "uvicorn"), ("nginx", "nginx"), ("wrk", "wrk"),
                           ("LiteLLM", "litellm")):
            self.w(f"| {label} | {m.get(key, NA)} |")
        self.w(f"| load average at start / end | {' '.join(m.get('loadavg_start', []))} / "
               f"{' '.join(m.get('loadavg_end', []))} |")
        self.w()
        self.w("**One box for everything.** Everything runs on one 2-core machine: load generator (wrk, one "
               "thread), upstreams (nginx, one worker; the paced SSE server), the gateway (two workers) and "
               "LiteLLM (two workers, idle while the others are measured; idle it used about 0.5 % of a core, "
               "measured separately). The load averages above tell whether anything else ran meanwhile. "
               "Absolute figures are pessimistic next to a dedicated load generator; the side-by-side ratios, "
               "measured in the same minutes, are the robust part.")
        self.w()

    def commands(self) -> None:
        a = self.b.args
        self.w("## Commands")
        self.w()
        self.w("```sh")
        self.w("make bench                     # = .venv/bin/python bench/run.py (defaults: 3 runs, 10 s wrk runs, "
               "64 connections, 10-minute soak)")
        self.w(f".venv/bin/python bench/run.py {self.b.meta.get('argv', '')}".rstrip() + "   # this run")
        self.w("```")
        self.w()
        self.w("What runs:")
        self.w()
        self.w("- **direct**: the upstream itself. nginx (Debian's, one worker, keep-alive, no log) answers "
               "`POST /v1/chat/completions`, `/v1/responses` and `/v1/messages` with canned JSON via `return 200 '…'`; "
               f"streams come from `bench/harness/paced_sse.py`, a bare asyncio/uvloop server (no framework) that "
               f"writes {a.deltas} Chat deltas {a.interval_ms:g} ms apart on an absolute clock (nginx cannot pace).")
        self.w(f"- **gateway**: `uvicorn gateway.asgi:application --workers {a.workers} --loop uvloop --http httptools "
               "--no-access-log --lifespan on`, SQLite in a throwaway data directory, no Redis, configured with "
               "`manage.py loadconfig` (five providers: one per upstream protocol, one with the five-rule chain, one "
               "streaming), capture off unless the case says otherwise.")
        self.w(f"- **LiteLLM**: its proxy from PyPI in `bench/.venv-litellm` (version pinned, see "
               f"`bench/harness/tools.py`), `litellm --config … --num_workers {a.workers}`, `openai/bench-model` with "
               "`api_base` at the same nginx / paced server, a master key, the local cost map.")
        self.w(f"- **load**: wrk, one thread, {a.seconds:g} s per run, Lua scripts for the POST bodies "
               "(`bench/harness/wrk.py`); latency percentiles are wrk's. Streams are timed by "
               "`bench/harness/stream_client.py` (raw socket + httptools, one keep-alive connection, "
               f"{a.stream_requests} streams per run): *first byte* is the first byte of the response body.")
        self.w("- **added latency** = system − direct, per run (runs are paired), then the median of the runs.")
        self.w()

    def target_rows(self) -> None:
        conns = self.b.args.connections
        chain = self.added("chain-1", "gateway")
        self._t("added p50 at 1 connection with the five-rule chain ≤ 1 ms", chain, lambda v: v <= 1.0, "ms", 3)
        rps = _series(self.cases.get(f"chat-{conns}"), "gateway", "rps") if f"chat-{conns}" in self.cases else None
        self._t(f"≥ 2,500 req/s at {conns} connections, two workers", rps, lambda v: v >= 2500, "req/s", 0)
        p99 = _series(self.cases[f"chat-{conns}"], "gateway", "p99") if f"chat-{conns}" in self.cases else None
        self._t(f"p99 at {conns} connections ≤ 100 ms", p99, lambda v: v <= 100, "ms", 1)
        ttfb = self.stream_added("stream-chat", "gateway")
        self._t("added streaming time to first byte ≤ 2 ms", ttfb, lambda v: v <= 2.0, "ms", 3)
        mem = self.b.memory.get("gateway", {})
        peak = max((sum(v) for label, v in mem.items() if v and label != "capture on (peak)"), default=None)
        if peak is None:
            self.targets.append(("RSS of both workers ≤ 200 MB", NA, None))
        else:
            self.targets.append(("RSS of both workers ≤ 200 MB (highest sum seen idle, under load, after load, "
                                 "after soak; capture off)",
                                 f"{peak:.1f} MB", peak <= 200))
        flat = self.soak_flat()
        self.targets.append(("RSS flat over the soak", flat[0], flat[1]))
        ll_rps = _series(self.cases.get(f"chat-{conns}"), "litellm", "rps") if f"chat-{conns}" in self.cases else None
        if rps and ll_rps:
            r = Figure.of(rps).median / Figure.of(ll_rps).median
            self.targets.append((f"≥ 4× LiteLLM's throughput ({conns} connections, Chat → Chat)", f"{r:.1f}×", r >= 4))
        else:
            self.targets.append(("≥ 4× LiteLLM's throughput", NA, None))
        gw_add, ll_add = _med(self.added("chat-1", "gateway")), _med(self.added("chat-1", "litellm"))
        if gw_add is not None and ll_add:
            frac = gw_add / ll_add
            self.targets.append(("≤ ¼ of LiteLLM's added latency (p50, 1 connection, Chat → Chat)",
                                 f"{gw_add:.3f} ms vs {ll_add:.3f} ms = {frac:.2f}", frac <= 0.25))
        else:
            self.targets.append(("≤ ¼ of LiteLLM's added latency", NA, None))

    def _t(self, label: str, values: list[float] | None, ok, unit: str, digits: int) -> None:
        if not values:
            self.targets.append((label, NA, None))
            return
        f = Figure.of(values)
        self.targets.append((label, f"{f.fmt(digits)} {unit}", bool(ok(f.median))))

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

    def targets_table(self) -> None:
        self.target_rows()
        self.w("## Targets")
        self.w()
        self.w("| target | measured | met |")
        self.w("| --- | --- | --- |")
        for label, value, ok in self.targets:
            mark = "**yes**" if ok else ("**NO**" if ok is False else "not measured")
            self.w(f"| {label} | {value} | {mark} |")
        self.w()

    def latency_table(self) -> None:
        self.w("## Added latency, one connection, non-stream")
        self.w()
        self.w("p50 / p99 in ms. *added* = system − direct.")
        self.w()
        self.w("| case | direct p50 | gateway p50 | LiteLLM p50 | gateway added p50 | LiteLLM added p50 | "
               "LiteLLM added ÷ gateway added | direct p99 | gateway p99 | LiteLLM p99 | gateway added p99 | "
               "LiteLLM added p99 | gateway CPU ms/req | LiteLLM CPU ms/req |")
        self.w("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        for case in self.cases.values():
            if case.connections != 1 or case.key.startswith("capture"):
                continue
            row = [case.title]
            row += [_fig(_series(case, s, "p50"), 3) for s in ("direct", "gateway", "litellm")]
            ga, la = self.added(case.key, "gateway"), self.added(case.key, "litellm")
            row += [_fig(ga, 3), _fig(la, 3), _ratio(_med(la), _med(ga))]
            row += [_fig(_series(case, s, "p99"), 3) for s in ("direct", "gateway", "litellm")]
            row += [_fig(self.added(case.key, "gateway", "p99"), 3), _fig(self.added(case.key, "litellm", "p99"), 3)]
            row += [_fig(case.cpu_ms.get("gateway"), 3), _fig(case.cpu_ms.get("litellm"), 3)]
            self.w("| " + " | ".join(row) + " |")
        self.w()
        self.notes([c for c in self.cases.values() if c.connections == 1])

    def throughput_table(self) -> None:
        conns = self.b.args.connections
        self.w(f"## Throughput and tail latency, {conns} connections, non-stream")
        self.w()
        self.w("| case | direct req/s | gateway req/s | LiteLLM req/s | gateway ÷ LiteLLM | gateway ÷ direct | "
               "direct p99 ms | gateway p50 ms | gateway p99 ms | LiteLLM p50 ms | LiteLLM p99 ms | "
               "gateway CPU ms/req | LiteLLM CPU ms/req |")
        self.w("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        for case in self.cases.values():
            if case.connections == 1 or case.key.startswith("capture"):
                continue
            rps = {s: _series(case, s, "rps") for s in ("direct", "gateway", "litellm")}
            row = [case.title] + [_fig(rps[s], 0) for s in ("direct", "gateway", "litellm")]
            row += [_ratio(_med(rps["gateway"]), _med(rps["litellm"])),
                    _ratio(_med(rps["gateway"]), _med(rps["direct"]), 2)]
            row += [_fig(_series(case, "direct", "p99"), 2), _fig(_series(case, "gateway", "p50"), 2),
                    _fig(_series(case, "gateway", "p99"), 2), _fig(_series(case, "litellm", "p50"), 2),
                    _fig(_series(case, "litellm", "p99"), 2)]
            row += [_fig(case.cpu_ms.get("gateway"), 3), _fig(case.cpu_ms.get("litellm"), 3)]
            self.w("| " + " | ".join(row) + " |")
        self.w()
        self.w("The direct figure is bounded by wrk's single thread and the shared cores, not by nginx. "
               "*CPU ms/req* is the server workers' user+system CPU time during the run divided by the requests "
               "served: unlike req/s it does not depend on how much of the shared cores the server got, so "
               "2000 ÷ it is the req/s two otherwise idle cores would sustain.")
        self.w()
        self.notes([c for c in self.cases.values() if c.connections != 1 and not c.key.startswith("capture")])

    def notes(self, cases: list[Case]) -> None:
        for case in cases:
            extra = [case.note] if case.note else []
            errs = _errors(case)
            if errs:
                extra.append("errors: " + errs)
            for system in ("direct", "gateway", "litellm"):
                why = self.b.checks.get(f"{case.key}/{system}")
                if why:
                    extra.append(f"{system} left out, its check failed: `{why[:160]}`")
            if extra:
                self.w(f"- {case.title}: " + "; ".join(extra))
        self.w()

    def stream_table(self) -> None:
        a = self.b.args
        self.w("## Streaming")
        self.w()
        self.w(f"One keep-alive connection, {a.stream_requests} streams per run; per run the p50 of those streams, "
               f"then the median of {a.runs} runs. The stream itself lasts about "
               f"{(a.deltas - 1) * a.interval_ms:.0f} ms by construction.")
        self.w()
        self.w("| case | direct first byte | gateway first byte | LiteLLM first byte | gateway added | "
               "LiteLLM added | direct total | gateway total | LiteLLM total | gateway added total | "
               "LiteLLM added total |")
        self.w("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        for sc in self.streams.values():
            row = [sc.title] + [_fig(sc.first.get(s), 3) for s in ("direct", "gateway", "litellm")]
            row += [_fig(self.stream_added(sc.key, "gateway"), 3), _fig(self.stream_added(sc.key, "litellm"), 3)]
            row += [_fig(sc.total.get(s), 2) for s in ("direct", "gateway", "litellm")]
            row += [_fig(self.stream_added(sc.key, "gateway", "total"), 2),
                    _fig(self.stream_added(sc.key, "litellm", "total"), 2)]
            self.w("| " + " | ".join(row) + " |")
        self.w()
        for sc in self.streams.values():
            for system in ("direct", "gateway", "litellm"):
                why = self.b.checks.get(f"{sc.key}/{system}")
                if why:
                    self.w(f"- {sc.title}: {system} left out, its check failed: `{why[:160]}`")
        self.w("In the Messages-client stream the direct figure is the Chat upstream's own stream (the one the "
               "gateway translates), so *added* includes the translation.")
        self.w()

    def capture_table(self) -> None:
        self.w("## Capture off vs on")
        self.w()
        sink = str(self.b.meta.get("capture_sink"))
        self.w(f"Same gateway, `GlobalSettings.capture_enabled` on, one key with capture mode `off` and one with "
               f"`all`, runs interleaved; before each run the harness waits until the workers are idle. Capture "
               f"sink at run time: **{sink}**"
               + (" — so *on* measures only the proxy's record building, not persistence." if "stub" in sink else
                  ". The writer persists captures in a background thread of each worker (SQLite here) behind a "
                  "bounded queue, so it can lag behind the responses: *drain* is how long the workers stayed busy "
                  "after wrk stopped."))
        self.w()
        self.w("| case | off req/s | on req/s | on ÷ off | on: writer drain after the run (s) | off p50 ms | "
               "on p50 ms | off p99 ms | on p99 ms | off CPU ms/req | on CPU ms/req (incl. drain) |")
        self.w("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        for case in self.b.capture_cases:
            off, on = _series(case, "gateway", "rps"), _series(case, "gateway+capture", "rps")
            self.w(f"| {case.title} | {_fig(off, 0)} | {_fig(on, 0)} | {_ratio(_med(on), _med(off), 2)} | "
                   f"{_fig(case.drain.get('gateway+capture'), 1)} | "
                   f"{_fig(_series(case, 'gateway', 'p50'), 3)} | {_fig(_series(case, 'gateway+capture', 'p50'), 3)} | "
                   f"{_fig(_series(case, 'gateway', 'p99'), 3)} | {_fig(_series(case, 'gateway+capture', 'p99'), 3)} | "
                   f"{_fig(case.cpu_ms.get('gateway'), 3)} | {_fig(case.cpu_ms.get('gateway+capture'), 3)} |")
        self.w()
        counts = self.b.meta.get("captures")
        if counts:
            asked = sum(r.requests for c in self.b.capture_cases for r in c.results.get("gateway+capture", []))
            secs = sum(self.b.args.seconds + d for c in self.b.capture_cases for d in c.drain.get("gateway+capture", []))
            rate = counts["persisted"] / secs if secs else 0
            self.w(f"Of {asked} capture-on requests, **{counts['persisted']} captures were persisted and "
                   f"{counts['dropped']} dropped** (\"capture dropped: writer queue full\" in the gateway log): the "
                   f"writer persisted about {rate:.0f} captures/s over the runs and their drains, so above that rate "
                   "capture *on* sheds captures instead of slowing or failing responses (as designed), and what it "
                   "keeps is a sample.")
            self.w()
        self.notes(self.b.capture_cases)

    def memory_table(self) -> None:
        self.w("## Memory (RSS of the server workers, MB)")
        self.w()
        labels = ["idle", "under load (peak)", "after load", "capture on (peak)", "after soak"]
        self.w("| system | " + " | ".join(labels) + " |")
        self.w("| --- | " + " | ".join("---" for _ in labels) + " |")
        for system, phases in self.b.memory.items():
            cells = []
            for label in labels:
                v = phases.get(label)
                cells.append(f"{sum(v):.1f} ({' + '.join(f'{x:.1f}' for x in v)})" if v else NA)
            self.w(f"| {system} | " + " | ".join(cells) + " |")
        self.w()
        self.w("Sum of the workers (each worker in parentheses); the uvicorn/LiteLLM master process is not counted. "
               "LiteLLM was idle during the soak.")
        self.w()

    def soak_section(self) -> None:
        soak = self.b.soak
        self.w("## Soak")
        self.w()
        if not soak:
            self.w("Not run (`--soak-seconds 0`).")
            self.w()
            return
        default = " (the `make bench` default)" if soak["seconds"] == 600 else \
            " — **shorter than the 10-minute default of `make bench`**, to fit this run into the time available"
        self.w(f"{soak['seconds']:.0f} s{default}: back-to-back wrk bursts (≤ 10 s each) at "
               f"{soak['connections']} connections, a weighted round-robin of Chat, five-rule chain, Messages client → "
               f"Chat and large body (8 each) and one paced stream; {soak['requests']} requests, {soak['errors']} socket errors, "
               f"{soak['non2xx']} non-2xx. Throughput per burst: {_fig(soak['rps'], 0)} req/s.")
        self.w()
        flat = self.soak_flat()
        self.w(f"RSS of both workers, a quarter of the way in → end: {flat[0]} — "
               f"{'flat' if flat[1] else 'NOT flat'} (criterion: growth ≤ 10 MB and ≤ 5 %).")
        self.w()
        pts = soak["samples"]
        step = max(1, len(pts) // 12)
        shown = pts[::step] + ([pts[-1]] if (len(pts) - 1) % step else [])
        self.w("| t (s) | " + " | ".join(f"{t:.0f}" for t, _ in shown) + " |")
        self.w("| --- | " + " | ".join("---" for _ in shown) + " |")
        self.w("| RSS MB | " + " | ".join(f"{sum(v):.1f}" for _, v in shown) + " |")
        self.w()

    def profile_section(self) -> None:
        if not self.b.profiles:
            return
        self.w("## Profile (py-spy, one gateway worker, Chat → Chat at "
               f"{self.b.args.connections} connections)")
        self.w()
        for p in self.b.profiles:
            if "error" in p:
                self.w(f"- {p['case']}: {p['error']}")
                continue
            self.w(f"Worker {p['pid']}: {p['samples']} samples at 250 Hz while the gateway served {p['rps']:.0f} req/s "
                   f"(raw collapsed stacks: `{p['file']}`, not committed).")
            self.w()
            self.w("Own time by component: " + ", ".join(f"{name} {pct:.1f} %" for name, pct in p["components"]) + ".")
            self.w()
            self.w("| own time % | frame | | inclusive % | frame |")
            self.w("| --- | --- | --- | --- | --- |")
            for (fo, po), (fi, pi) in zip(p["own"], p["inclusive"], strict=False):
                self.w(f"| {po:.1f} | `{fo}` | | {pi:.1f} | `{fi}` |")
            self.w()
            self.w("Inclusive list: frames below the worker's start-up chain (process, uvicorn server, event loop "
                   "runner) only.")
            self.w()

    def missed(self) -> None:
        """What the data says about each missed target (the analysis is in the text around it)."""
        missed = [label for label, _, ok in self.targets if ok is False]
        if not missed:
            return
        conns = self.b.args.connections
        self.w("## Where a target is missed")
        self.w()
        for label in missed:
            self.w(f"- **{label}**")
        self.w()
        rows = []
        for case in self.cases.values():
            if case.connections != conns or case.key.startswith("capture"):
                continue
            rps, cpu = _series(case, "gateway", "rps"), case.cpu_ms.get("gateway")
            if rps and cpu:
                cores = [r * c / 1000 for r, c in zip(rps, cpu, strict=False)]
                rows.append(f"{case.title}: the two workers used {Figure.of(cores).fmt(2)} cores "
                            f"({Figure.of(cpu).median:.3f} ms CPU per request)")
        if rows:
            self.w(f"How much of the 2 cores the gateway got during the {conns}-connection runs (CPU time ÷ wall "
                   "time of both workers); the rest went to wrk, nginx and anything else on the box:")
            self.w()
            for r in rows:
                self.w(f"- {r}")
            self.w()
        if (Path(__file__).resolve().parent.parent / "TAIL.md").exists():
            self.w("The p99 at 64 connections is taken apart in [`TAIL.md`](TAIL.md): garbage-collection pauses "
                   "per worker, the split of connections between the workers and each worker's CPU, with and "
                   "without `gc.freeze()`.")
            self.w()

    def render(self) -> str:
        self.header()
        self.targets_table()
        self.missed()
        self.commands()
        self.latency_table()
        self.throughput_table()
        self.stream_table()
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
