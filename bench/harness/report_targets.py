"""The targets table: every target of issue 20 (and the benchmark checks of issues 15, 16 and 17),
its figure with the spread of the runs, met or not, and for a missed one what the data says.

A target whose case is not in the run (``--only``, or a case another family has not landed yet)
is listed as "not measured", never dropped. Families that measure something the generic tables do
not (1,000 concurrent streams, the worker split) put ``bench.figures[target_id] = (text, met)``;
the rows below with a ``figure`` id show it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .report_util import NA, capture_counts, paired_ratio, series
from .stats import Figure


@dataclass
class Target:
    issue: str
    label: str
    value: str = NA
    ok: bool | None = None
    why: str = ""  # shown under "Where a target is missed" when ok is False


class Targets:
    def __init__(self, report: Any) -> None:
        self.r = report
        self.b = report.b
        self.rows: list[Target] = []
        self.known: set[str] = set()

    # -- helpers -----------------------------------------------------------------------------------
    def case(self, key: str):
        return self.r.cases.get(key)

    def add(
        self,
        issue: str,
        label: str,
        values: list[float] | None,
        ok,
        unit: str = "ms",
        digits: int = 3,
        why: str = "",
        missing: str = "",
    ) -> Target:
        t = Target(issue, label)
        if values:
            f = Figure.of(values)
            t.value, t.ok, t.why = f"{f.fmt(digits)} {unit}".rstrip(), bool(ok(f.median)), why
        else:
            t.value = NA + (f" ({missing})" if missing else " (case not in this run)")
        self.rows.append(t)
        return t

    def captures_kept(self) -> str:
        counts = capture_counts(self.b)
        if counts is None:
            return ""
        asked, persisted, _ = counts
        return f"; {100.0 * persisted / asked:.0f} % of the run's capture-on requests were captured, the writer shed the rest"

    def cpu(self, key: str, system: str = "gateway") -> list[float] | None:
        c = self.case(key)
        return c.cpu_ms.get(system) if c else None

    def cores_used(self, key: str) -> str:
        c = self.case(key)
        rps, cpu = series(c, "gateway", "rps"), self.cpu(key)
        if not rps or not cpu:
            return ""
        cores = [r * m / 1000 for r, m in zip(rps, cpu, strict=False)]
        return f" The two workers used {Figure.of(cores).fmt(2)} cores during these runs."

    def profile_hint(self) -> str:
        p = next((p for p in self.b.profiles if "components" in p), None)
        if p is None:
            return ""
        top = ", ".join(f"{name} {pct:.0f} %" for name, pct in p["components"][:4])
        return f" Where a worker's time goes (py-spy, own time): {top}; see the profile section."

    # -- issue 20 ----------------------------------------------------------------------------------
    def issue20(self) -> None:
        n = self.b.args.connections
        self.add(
            "20",
            f"CPU per request, Chat → Chat, empty chain ≤ 0.15 ms ({n} conn)",
            self.cpu(f"chat-{n}"),
            lambda v: v <= 0.15,
            why="CPU per request is the sum of both workers' user+system time over the "
            "requests served."
            + self.cores_used(f"chat-{n}")
            + self.profile_hint()
            + " Where it goes (py-spy, bench/HOTPATH.md round four): the two socket writes (the upstream "
            "request in `h1client.post` and uvicorn's send, 15-25 % of a worker together: on loopback the "
            "sending syscall also runs the receiver's TCP path), the event loop about 7 %, the request-log "
            "insert (SQLite, in the writer thread) about 6 %, and the pipeline's Python (decode, route, "
            "transforms, encode, recorder) spread thin, no frame above 3 %. The upstream client is the "
            "gateway's own since 2026-12-06 (aiohttp was a quarter of a worker's time: -0.13 ms per "
            "request side by side); 0.15 ms would need the pipeline's Python roughly halved, not one "
            "component replaced.",
        )
        self.add(
            "20",
            f"CPU per request, five-rule chain ≤ 0.2 ms ({n} conn)",
            self.cpu(f"chain-{n}"),
            lambda v: v <= 0.2,
            why="The chain adds its transforms' work to the empty-chain cost above; "
            "compare the two rows of the throughput table." + self.cores_used(f"chain-{n}"),
        )
        for peer, label, factor in (("portkey", "Portkey", 5), ("litellm", "LiteLLM", 30)):
            ratios = paired_ratio(self.cpu(f"chat-{n}", peer), self.cpu(f"chat-{n}"))
            self.add(
                "20",
                f"≥ {factor}× less CPU per request than {label} (Chat → Chat, {n} conn)",
                ratios,
                lambda v, f=factor: v >= f,
                unit="×",
                digits=1,
                why=f"{label} spends {Figure.of(self.cpu(f'chat-{n}', peer) or [0]).median:.3f} ms per request, "
                f"the gateway {Figure.of(self.cpu(f'chat-{n}') or [0]).median:.3f} ms.",
                missing=f"{label} not in this run",
            )
        self.add(
            "20",
            "added p50 at 1 connection with the five-rule chain ≤ 0.2 ms",
            self.r.added("chain-1", "gateway"),
            lambda v: v <= 0.2,
            why="Added latency at one connection is the whole request's path through one "
            "worker: the CPU per request at 1 connection (latency table) is most of it.",
        )
        self.add(
            "20",
            "added streaming time to first byte ≤ 0.5 ms (p50)",
            self.r.stream_added("stream-chat", "gateway"),
            lambda v: v <= 0.5,
            why="The gateway's first-byte path runs cold: a stream's first event is made by code that "
            "last ran a whole stream earlier, and on this kind of box (a KVM guest, cores shared with other "
            "guests) that code runs about three times slower than back to back (bench/idle_gap.py: one "
            "request, call to response start, 0.23-0.27 ms back to back, 0.64-0.89 ms after 8-50 ms idle). "
            "On the wire nothing waits (tcpdump and strace, bench/STREAMS.md): request in to upstream "
            "request 0.39 ms, upstream answer to our head 0.34 ms, head to first chunk 0.15 ms.",
        )
        self.agent_rows()
        self.figure_row(
            "20",
            "streams-1000-first-p99",
            "1,000 concurrent paced streams: no error, added first-byte p99 ≤ 5 ms",
            why="One round, not a median of three: the phase runs once. A new stream's first event waits "
            "behind whatever the loop is doing: at the peak the two workers relay about 5,000 SSE events a "
            "second and start about 100 streams a second, on the same two cores as the client's 1,000 sockets "
            "and the paced server. Not the garbage collector: collecting the middle generation five times as "
            "often cut its pauses from 31-52 ms to 9-18 ms and halved the slowest stream's first byte, but left "
            "the p99 at 10-13 ms, inside the shipped setting's own spread between runs (9.8-19.5 ms; "
            "bench/STREAMS.md, 2026-12-07 evening). What is left is queueing on two shared cores: the lever is "
            "less CPU per event and per stream start (since 2026-12-07 one timer per stream instead of one per "
            "event, and 129 tracked objects per open stream instead of 152).",
        )
        self.figure_row(
            "20",
            "streams-1000-rss",
            "1,000 streams: RSS of both workers ≤ 300 MB during, back to idle after",
            why="What stays is fragmentation, not held memory (bench/MEMORY.md): one run of about 13 MB of "
            "pymalloc arenas per worker, each kept by a few objects; tracemalloc finds under 1 MB of live "
            "Python objects more than before the burst, and a pool capped at 2 connections keeps the same.",
        )
        cap = self.case(f"capture-{n}")
        row = self.add(
            "20",
            f"capture on ≥ 80 % of capture-off throughput ({n} conn)",
            paired_ratio(series(cap, "gateway+capture", "rps"), series(cap, "gateway", "rps")),
            lambda v: v >= 0.8,
            unit="×",
            digits=2,
            why="See the capture section: the writer's drain after each run and the persisted/dropped counts "
            "tell whether the request path or the writer is the limit.",
        )
        row.value += self.captures_kept()
        self.figure_row("20", "worker-split", "connections spread evenly over the workers")
        self.rss_rows()

    def agent_rows(self) -> None:
        agent = [c for c in self.r.cases.values() if c.key.startswith("agent-") and c.connections == 1]
        if not agent:
            self.rows.append(
                Target(
                    "20",
                    "agent-sized requests (1 MB Messages → Chat, 1 MB Responses): added p50 ≤ 5 ms",
                    NA + " (no agent-* case in this run)",
                )
            )
        for c in agent:
            self.add(
                "20",
                f"{c.title}: added p50 ≤ 5 ms",
                self.r.added(c.key, "gateway"),
                lambda v: v <= 5.0,
                why=f"CPU per request {Figure.of(c.cpu_ms.get('gateway') or [0]).median:.2f} ms; the body is "
                "decoded, transformed and encoded once each way.",
            )

    def figure_row(self, issue: str, fid: str, label: str, why: str = "") -> None:
        """``why``: the diagnosis when the family measured none of its own (``<fid>:why``)."""
        self.known.add(fid)
        value, ok = self.b.figures.get(fid, (NA + " (case not in this run)", None))[:2]
        self.rows.append(
            Target(issue, label, value, ok, why=self.b.figures.get(fid + ":why", (why, None))[0])
        )

    def other_figures(self) -> None:
        """Figures a family reports against a target this table does not list yet: ``(text, met,
        label)`` (the label defaults to the id)."""
        for fid, fig in self.b.figures.items():
            if fid not in self.known and not fid.endswith(":why"):
                label = fig[2] if len(fig) > 2 else fid
                self.rows.append(
                    Target("20", label, fig[0], fig[1], why=self.b.figures.get(fid + ":why", ("", None))[0])
                )

    def rss_rows(self) -> None:
        idle = self.b.memory.get("gateway", {}).get("idle")
        t = self.add(
            "20",
            "RSS of two idle workers ≤ 150 MB",
            [sum(idle)] if idle else None,
            lambda v: v <= 150,
            unit="MB",
            digits=1,
            why="Each worker imports Django, the admin apps and the proxy; the idle "
            "figure is taken right after start-up, before any request. jsonschema and watchfiles are out "
            "of the workers now (3 MB each); what is left per worker (bench/STREAMS.md): uvicorn with "
            "uvloop and httptools ~16 MB, aiohttp 11 MB, Django with the admin 14 MB, the models 12 MB "
            "of which cryptography is 8.8 MB (7.1 MB file-backed, decrypts channel keys), the transform "
            "registry 3.4 MB. RSS counts the shared file-backed pages (~27 MB per worker) once per worker: "
            "PSS is beside it. Forking from a pre-loaded parent would lower PSS, not RSS.",
        )
        if idle:
            t.value = f"{sum(idle):.1f} MB ({' + '.join(f'{x:.1f}' for x in idle)})"
            pss = self.b.memory.get("gateway", {}).get("idle PSS")
            if pss:
                t.value += f"; PSS {sum(pss):.1f} MB"
        flat = self.r.soak_flat()
        self.rows.append(
            Target(
                "20",
                "RSS flat over the 10-minute soak",
                flat[0],
                flat[1],
                why="Growth after the first quarter of the soak; the soak table shows the curve.",
            )
        )

    # -- issues 17, 15, 16 -------------------------------------------------------------------------
    def checks(self) -> None:
        n = self.b.args.connections
        logs = self.case(f"logs-{n}")
        self.add(
            "17",
            f"request logs on ≥ 90 % of off throughput ({n} conn)",
            paired_ratio(series(logs, "gateway", "rps"), series(logs, "gateway+nolog", "rps")),
            lambda v: v >= 0.9,
            unit="×",
            digits=2,
            why="On and off are two gateway processes; the CPU per request of each is in the checks table. "
            "With no Redis the rows are written by a thread in each worker (about 40 us of CPU per row "
            "for the SQLite insert after this round's batching, plus building the row): at 64 connections "
            "the workers are CPU-bound, so that thread's share comes straight off throughput. With Redis "
            "the rows go to the Celery worker instead, which moves the insert off the workers.",
        )
        self.add(
            "17",
            "request logs on add ≤ 0.05 ms p50 (1 conn)",
            self.r.added("logs-1", "gateway", base="gateway+nolog"),
            lambda v: v <= 0.05,
            why="On the request path the recorder is sealed (a tuple of the request's figures) and queued; "
            "the writer thread builds the row and inserts it into SQLite in the same process, so its CPU "
            "counts too (bench/REQUESTLOGS.md). On and off are two gateway processes at one connection: this "
            "pair measured -0.30 ms in the 05:50 run and +0.026 ms in a rerun the same day, so read its spread "
            "before a few hundredths of a millisecond.",
        )
        self.add(
            "17",
            "per-key limits on add ≤ 0.1 ms p50, with Redis (1 conn)",
            self.r.added("limits-redis-1", "gateway+redis+limits", base="gateway+redis"),
            lambda v: v <= 0.1,
            why="With Redis a request with limits makes one round trip on its path: the admission "
            "script (one EVALSHA on the limiter's own connection), written when the key is known and "
            "read just before the upstream call, so Redis answers while the request decodes and "
            "encodes. The end of the request (free the slot, settle tokens and spend) rides in the "
            "next admission's write. What is left is CPU: a send and a recv system call, the Python "
            "around them, and redis-server on the same two cores (bench/LIMITS_REDIS.md). At one "
            "connection this pair's p50s move with the box: compare the A/A affinity pair's spread "
            "in this run before reading a few hundredths of a millisecond either way.",
            missing="redis-server missing or case not in this run",
        )
        self.add(
            "17",
            "per-key limits on add ≤ 0.1 ms p50, no Redis (per-worker counters) (1 conn)",
            self.r.added("limits-1", "gateway+limits"),
            lambda v: v <= 0.1,
        )
        # affinity off is the default, so plain vs affinity-off is an A/A pair: its paired
        # differences are this run's noise floor for a p50 at one connection.
        aa = self.r.added("affinity-1", "gateway+affinity-off")
        noise = max(0.01, (max(aa) - min(aa)) / 2) if aa else 0.01
        self.add(
            "15",
            "seven cache transforms whose glob misses: no measurable cost (added p50 within the A/A noise, 1 conn)",
            self.r.added("cache-miss-1", "gateway+cache-miss"),
            lambda v: v <= noise,
            why=f"Noise floor {noise:.3f} ms: half the spread of the A/A pair (plain vs affinity off, which is "
            "the default) in this run, and never under 0.01 ms.",
        )
        self.add(
            "15",
            "affinity off: no measurable cost (A/A pair: added p50 within its own run-to-run spread, 1 conn)",
            aa,
            lambda v: abs(v) <= noise,
            why="affinity_mode off is the default, so this is the same provider twice: the row shows the noise.",
        )
        self.images()

    def images(self) -> None:
        img = getattr(self.b, "images", None) or {}
        runs = img.get("runs") or []
        t = self.add(
            "16",
            "text p50 within 2× of its idle value under 20 concurrent 4 MP compressions",
            [r["ratio"] for r in runs] or None,
            lambda v: v <= 2.0,
            unit="×",
            digits=2,
            missing=img.get("error", "case not in this run")[:120],
        )
        if runs:
            base, load = (
                Figure.of([r["baseline_p50"] for r in runs]),
                Figure.of([r["loaded_p50"] for r in runs]),
            )
            t.why = (
                f"Text p50 {base.fmt(2)} ms idle, {load.fmt(2)} ms under image load (one gateway worker; the "
                "images are decoded and re-encoded in the image pool, off the event loop, but they share the "
                "two cores with the text requests, the load generators and the mock upstream)."
            )

    def compute(self) -> list[Target]:
        self.issue20()
        self.checks()
        self.other_figures()
        return self.rows
