"""The tables of ``bench/RESULTS.md`` (a mix-in of ``report.Report``: it reads ``self.b``, the
finished bench, and writes with ``self.w``)."""

from __future__ import annotations

from typing import Any

from .cases import label
from .report_util import capture_counts, errors, fig, mb, med, paired_ratio, ratio, series

PROCESSES = {"gateway": "{w} uvicorn workers", "litellm": "{w} uvicorn workers", "portkey": "1 Node process"}


class Tables:
    b: Any
    cases: dict
    main: list
    check_cases: list
    streams: dict

    def w(self, line: str = "") -> None:  # pragma: no cover - Report defines it
        raise NotImplementedError

    def peers(self) -> list[str]:  # pragma: no cover - Report defines it
        raise NotImplementedError

    def added(self, key: str, system: str, attr: str = "p50", base: str | None = None) -> list[float] | None:
        raise NotImplementedError  # pragma: no cover - Report defines it

    def stream_added(self, key: str, system: str, which: str = "first") -> list[float] | None:
        raise NotImplementedError  # pragma: no cover - Report defines it

    def soak_flat(self) -> tuple[str, bool | None]:
        raise NotImplementedError  # pragma: no cover - Report defines it

    def row(self, cells: list[str]) -> None:
        self.w("| " + " | ".join(cells) + " |")

    def head(self, cells: list[str]) -> None:
        self.row(cells)
        self.row(["---"] * len(cells))

    # -- peers ---------------------------------------------------------------------------------------
    def peers_table(self) -> None:
        n = self.b.args.connections
        one, many = self.cases.get("chat-1"), self.cases.get(f"chat-{n}")
        systems = self.peers()
        if not systems or (one is None and many is None):
            return
        self.w("## The peers side by side (Chat → Chat, empty chain)")
        self.w()
        self.head(
            [
                "system",
                "processes",
                "added p50, 1 conn (ms)",
                "added p99, 1 conn (ms)",
                f"req/s, {n} conn",
                f"p99, {n} conn (ms)",
                f"CPU ms/req, {n} conn",
                "CPU ms/req, 1 conn",
                "CPU/req ÷ gateway's",
                "req/s ÷ gateway's",
                "RSS idle (MB)",
                "RSS peak under load (MB)",
            ]
        )
        gw_cpu = many.cpu_ms.get("gateway") if many else None
        gw_rps = series(many, "gateway", "rps")
        for s in systems:
            mem = self.b.memory.get(s, {})
            cpu_ratio = paired_ratio(many.cpu_ms.get(s) if many else None, gw_cpu)
            self.row(
                [
                    label(s),
                    PROCESSES.get(s, "").format(w=self.b.args.workers),
                    fig(self.added("chat-1", s), 3),
                    fig(self.added("chat-1", s, "p99"), 3),
                    fig(series(many, s, "rps"), 0),
                    fig(series(many, s, "p99"), 2),
                    fig(many.cpu_ms.get(s) if many else None, 3),
                    fig(one.cpu_ms.get(s) if one else None, 3),
                    fig(cpu_ratio, 1) + ("×" if cpu_ratio else ""),
                    fig(paired_ratio(series(many, s, "rps"), gw_rps), 3),
                    mb(mem.get("idle")),
                    mb(mem.get("under load (peak)")),
                ]
            )
        self.w()
        for key, why in self.b.checks.items():
            if key.startswith("peer/"):
                self.w(f"- {label(key.split('/', 1)[1])} {why}")
        self.w()
        self.w(
            "Portkey runs one Node process (one event loop) against two workers for the gateway and LiteLLM, so "
            "its req/s is capped by one core; the CPU per request is the fair comparison (2000 ÷ it is the req/s "
            "two otherwise idle cores would give a server that could use both)."
        )
        self.w()

    # -- per-case tables -----------------------------------------------------------------------------
    def latency_table(self) -> None:
        systems = self.peers()
        self.w("## Added latency, one connection, non-stream")
        self.w()
        self.w(
            "p50 / p99 in ms. *added* = system − direct. Per system: p50, added p50, added p99, CPU ms/req."
        )
        self.w()
        cells = ["case", "direct p50", "direct p99"]
        for s in systems:
            cells += [
                f"{label(s)} p50",
                f"{label(s)} added p50",
                f"{label(s)} added p99",
                f"{label(s)} CPU ms/req",
            ]
        self.head(cells)
        cases = [c for c in self.main if c.connections == 1]
        for case in cases:
            row = [case.title, fig(series(case, "direct", "p50"), 3), fig(series(case, "direct", "p99"), 3)]
            for s in systems:
                row += [
                    fig(series(case, s, "p50"), 3),
                    fig(self.added(case.key, s), 3),
                    fig(self.added(case.key, s, "p99"), 3),
                    fig(case.cpu_ms.get(s), 3),
                ]
            self.row(row)
        self.w()
        self.notes(cases)

    def throughput_table(self) -> None:
        n = self.b.args.connections
        systems = self.peers()
        self.w(f"## Throughput and tail latency, {n} connections, non-stream")
        self.w()
        cells = ["case", "direct req/s", "direct p99 ms"]
        for s in systems:
            cells += [
                f"{label(s)} req/s",
                f"{label(s)} p50 ms",
                f"{label(s)} p99 ms",
                f"{label(s)} CPU ms/req",
            ]
        cells += [f"gateway ÷ {label(s)} req/s" for s in systems if s != "gateway"]
        self.head(cells)
        cases = [c for c in self.main if c.connections != 1]
        for case in cases:
            row = [case.title, fig(series(case, "direct", "rps"), 0), fig(series(case, "direct", "p99"), 2)]
            for s in systems:
                row += [
                    fig(series(case, s, "rps"), 0),
                    fig(series(case, s, "p50"), 2),
                    fig(series(case, s, "p99"), 2),
                    fig(case.cpu_ms.get(s), 3),
                ]
            row += [
                ratio(med(series(case, "gateway", "rps")), med(series(case, s, "rps")))
                for s in systems
                if s != "gateway"
            ]
            self.row(row)
        self.w()
        self.w(
            "The direct figure is bounded by wrk's single thread and the shared cores, not by nginx. "
            "*CPU ms/req* does not depend on how much of the shared cores a server got: 2000 ÷ it is the req/s "
            "two otherwise idle cores would sustain."
        )
        self.w()
        self.notes(cases)

    def notes(self, cases: list) -> None:
        for case in cases:
            extra = [case.note] if case.note else []
            errs = errors(case)
            if errs:
                extra.append("errors: " + errs)
            for key, why in self.b.checks.items():
                if key.startswith(case.key + "/"):
                    extra.append(f"{label(key.split('/', 1)[1])} left out: `{why[:160]}`")
            if extra:
                self.w(f"- {case.title}: " + "; ".join(extra))
        self.w()

    def stream_table(self) -> None:
        a = self.b.args
        systems = self.peers()
        self.w("## Streaming")
        self.w()
        self.w(
            f"One keep-alive connection, {a.stream_requests} streams per run; per run the p50 of those streams, "
            f"then the median of {a.runs} runs. The stream itself lasts about "
            f"{(a.deltas - 1) * a.interval_ms:.0f} ms by construction. Times in ms."
        )
        self.w()
        cells = ["case", "direct first byte", "direct total"]
        for s in systems:
            cells += [f"{label(s)} first byte", f"{label(s)} added first byte", f"{label(s)} added total"]
        self.head(cells)
        for sc in self.streams.values():
            row = [sc.title, fig(sc.first.get("direct"), 3), fig(sc.total.get("direct"), 2)]
            for s in systems:
                row += [
                    fig(sc.first.get(s), 3),
                    fig(self.stream_added(sc.key, s), 3),
                    fig(self.stream_added(sc.key, s, "total"), 2),
                ]
            self.row(row)
        self.w()
        for sc in self.streams.values():
            if sc.note:
                self.w(f"- {sc.title}: {sc.note}.")
            for key, why in self.b.checks.items():
                if key.startswith(sc.key + "/"):
                    self.w(f"- {sc.title}: {label(key.split('/', 1)[1])} left out: `{why[:160]}`")
        self.w(
            "In the Messages-client stream the direct figure is the Chat upstream's own stream (the one the "
            "gateway translates), so *added* includes the translation."
        )
        self.w()

    # -- issue checks --------------------------------------------------------------------------------
    def checks_table(self) -> None:
        if not self.check_cases:
            return
        self.w("## On vs off checks (issues 15 and 17)")
        self.w()
        self.w(
            "Each case compares a baseline (first system) with the same request and one feature on, runs "
            "interleaved. *added* is per-run paired (variant − baseline)."
        )
        self.w()
        self.head(
            [
                "case",
                "baseline",
                "variant",
                "baseline p50 ms",
                "variant p50 ms",
                "added p50 ms",
                "baseline req/s",
                "variant req/s",
                "variant ÷ baseline req/s",
                "baseline CPU ms/req",
                "variant CPU ms/req",
            ]
        )
        for case in self.check_cases:
            for s in [s for s in case.results if s != case.base]:
                self.row(
                    [
                        case.title,
                        case.base,
                        s,
                        fig(series(case, case.base, "p50"), 3),
                        fig(series(case, s, "p50"), 3),
                        fig(self.added(case.key, s), 3),
                        fig(series(case, case.base, "rps"), 0),
                        fig(series(case, s, "rps"), 0),
                        fig(paired_ratio(series(case, s, "rps"), series(case, case.base, "rps")), 3),
                        fig(case.cpu_ms.get(case.base), 3),
                        fig(case.cpu_ms.get(s), 3),
                    ]
                )
        self.w()
        self.notes(self.check_cases)
        for key, why in self.b.checks.items():
            if key.startswith("variant/"):
                self.w(f"- {key.split('/', 1)[1]}: {why}")
        self.w()

    def images_section(self) -> None:
        img = getattr(self.b, "images", None) or {}
        if not img:
            return
        self.w("## Images under load (issue 16)")
        self.w()
        if "error" in img:
            self.w(f"Not measured: {img['error']}")
            self.w()
            return
        runs = img["runs"]
        self.w(
            f"`bench/image_compress_bench.py`, run by `make bench` after the other servers stopped: its own "
            f"gateway ({img.get('workers', 1)} worker) and the bundled mock upstream; text requests from 4 clients "
            f"for {img['seconds']:g} s idle, then again while {img['images']} clients each send a "
            f"{img['megapixels']:g} MP JPEG through `image_compress_input`; {len(runs)} runs; "
            f"{img.get('errors', 0)} failed requests."
        )
        self.w()
        self.head(
            [
                "text p50 idle ms",
                "text p50 under image load ms",
                "ratio",
                "images compressed per run",
                "image request p50 ms",
            ]
        )
        self.row(
            [
                fig([r["baseline_p50"] for r in runs], 2),
                fig([r["loaded_p50"] for r in runs], 2),
                fig([r["ratio"] for r in runs], 2),
                fig([float(r["images_done"]) for r in runs], 0),
                fig([r["image_p50"] for r in runs if r.get("image_p50")], 0),
            ]
        )
        self.w()

    # -- capture, memory, soak, profile --------------------------------------------------------------
    def capture_table(self) -> None:
        if not self.b.capture_cases:
            return
        self.w("## Capture off vs on")
        self.w()
        sink = str(self.b.meta.get("capture_sink"))
        self.w(
            f"Same gateway, `GlobalSettings.capture_enabled` on, one key with capture mode `off` and one with "
            f"`all`, runs interleaved; before each run the harness waits until the workers are idle. Capture "
            f"sink at run time: **{sink}**. *drain* is how long the workers stayed busy after wrk stopped."
        )
        self.w()
        self.head(
            [
                "case",
                "off req/s",
                "on req/s",
                "on ÷ off",
                "on: writer drain after the run (s)",
                "off p50 ms",
                "on p50 ms",
                "off p99 ms",
                "on p99 ms",
                "off CPU ms/req",
                "on CPU ms/req (incl. drain)",
            ]
        )
        for case in self.b.capture_cases:
            off, on = series(case, "gateway", "rps"), series(case, "gateway+capture", "rps")
            self.row(
                [
                    case.title,
                    fig(off, 0),
                    fig(on, 0),
                    fig(paired_ratio(on, off), 2),
                    fig(case.drain.get("gateway+capture"), 1),
                    fig(series(case, "gateway", "p50"), 3),
                    fig(series(case, "gateway+capture", "p50"), 3),
                    fig(series(case, "gateway", "p99"), 3),
                    fig(series(case, "gateway+capture", "p99"), 3),
                    fig(case.cpu_ms.get("gateway"), 3),
                    fig(case.cpu_ms.get("gateway+capture"), 3),
                ]
            )
        self.w()
        counts = capture_counts(self.b)
        if counts is not None:
            asked, persisted, dropped = counts
            self.w(
                f"Of {asked} capture-on requests, **{persisted} captures were persisted and "
                f'{dropped} dropped** ("capture dropped" lines in the gateway log).'
            )
            self.w()
        self.notes(self.b.capture_cases)

    def memory_table(self) -> None:
        self.w("## Memory (RSS of the serving processes, MB; PSS at idle)")
        self.w()
        labels = ["idle", "idle PSS", "under load (peak)", "after load", "capture on (peak)", "after soak"]
        self.head(["system", *labels])
        for system, phases in self.b.memory.items():
            self.row([label(system)] + [mb(phases.get(lab)) for lab in labels])
        self.w()
        self.w(
            "Sum of the serving processes (each in parentheses): the uvicorn workers of the gateway and "
            "LiteLLM (the master process is not counted), Portkey's one node process. The peers were idle "
            "during the checks, capture and soak phases. RSS counts a page that several workers map (the "
            "extension modules and shared libraries, which the page cache holds once) in each of them; "
            "PSS divides it among them, so the PSS sum is the memory the workers take together."
        )
        self.w()

    def soak_section(self) -> None:
        soak = self.b.soak
        self.w("## Soak")
        self.w()
        if not soak:
            self.w("Not run (`--soak-seconds 0`, `--quick` or `--only`).")
            self.w()
            return
        default = (
            " (the `make bench` default)"
            if soak["seconds"] == 600
            else " — **shorter than the 10-minute default of `make bench`**"
        )
        self.w(
            f"{soak['seconds']:.0f} s{default}: back-to-back wrk bursts at {soak['connections']} connections, a "
            "weighted round-robin of Chat, five-rule chain, Messages client → Chat and large body (8 each) and one "
            f"paced stream; {soak['requests']} requests, {soak['errors']} socket errors, {soak['non2xx']} non-2xx. "
            f"Throughput per burst: {fig(soak['rps'], 0)} req/s."
        )
        self.w()
        flat = self.soak_flat()
        self.w(
            f"RSS of both workers, a quarter of the way in → end: {flat[0]} — "
            f"{'flat' if flat[1] else 'NOT flat'} (criterion: growth ≤ 10 MB and ≤ 5 %)."
        )
        self.w()
        pts = soak["samples"]
        step = max(1, len(pts) // 12)
        shown = pts[::step] + ([pts[-1]] if (len(pts) - 1) % step else [])
        self.head(["t (s)"] + [f"{t:.0f}" for t, _ in shown])
        self.row(["RSS MB"] + [f"{sum(v):.1f}" for _, v in shown])
        self.w()

    def profile_section(self) -> None:
        if not self.b.profiles:
            return
        self.w(
            f"## Profile (py-spy, one gateway worker, Chat → Chat at {self.b.args.connections} connections)"
        )
        self.w()
        for p in self.b.profiles:
            if "error" in p:
                self.w(f"- {p['case']}: {p['error']}")
                continue
            self.w(
                f"Worker {p['pid']}: {p['samples']} samples at 250 Hz while the gateway served {p['rps']:.0f} req/s "
                f"(raw collapsed stacks: `{p['file']}`, not committed)."
            )
            self.w()
            self.w(
                "Own time by component: "
                + ", ".join(f"{name} {pct:.1f} %" for name, pct in p["components"])
                + "."
            )
            self.w()
            self.head(["own time %", "frame", "", "inclusive %", "frame"])
            for (fo, po), (fi, pi) in zip(p["own"], p["inclusive"], strict=False):
                self.w(f"| {po:.1f} | `{fo}` | | {pi:.1f} | `{fi}` |")
            self.w()
