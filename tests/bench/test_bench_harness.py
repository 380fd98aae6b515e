"""The benchmark harness (``bench/run.py``) without measuring anything: the report rendered from a
made-up ``results.json`` (targets met and missed, peers, checks, the image case), the ``--quick``
and ``--only`` options, and the time a full ``make bench`` is planned to take."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent


@pytest.fixture(scope="module")
def run():
    spec = importlib.util.spec_from_file_location("bench_run", ROOT / "bench" / "run.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_run"] = module
    spec.loader.exec_module(module)
    return module


def wrk_result(rps: float, p50: float, p99: float) -> dict:
    return {
        "rps": rps,
        "p50": p50,
        "p90": p99 / 2,
        "p99": p99,
        "max": p99 * 2,
        "mean": p50,
        "requests": int(rps * 5),
        "errors": 0,
        "non2xx": 0,
    }


def case(
    key: str,
    conns: int,
    systems: dict[str, tuple[float, float, float, float | None]],
    *,
    section: str = "main",
    base: str = "direct",
) -> dict:
    """systems: name -> (req/s, p50 ms, p99 ms, CPU ms per request or None); three identical runs."""
    return {
        "key": key,
        "title": f"title of {key}",
        "connections": conns,
        "note": "",
        "settle": False,
        "drain": {},
        "section": section,
        "base": base,
        "targets": {
            s: {"path": "/v1/chat/completions", "body_file": "/dev/null", "headers": {}} for s in systems
        },
        "results": {s: [wrk_result(r, p50, p99)] * 3 for s, (r, p50, p99, _) in systems.items()},
        "cpu_ms": {s: [cpu] * 3 for s, (_, _, _, cpu) in systems.items() if cpu is not None},
    }


def fake_results(tmp_path: Path) -> Path:
    full = {
        "direct": (30000, 0.05, 0.4, None),
        "gateway": (9000, 0.20, 0.8, 0.12),
        "litellm": (250, 7.0, 10.0, 3.0),
        "portkey": (900, 1.5, 4.0, 1.0),
    }
    cases = [
        case("chat-1", 1, full),
        case("chat-64", 64, full),
        case("cross-1", 1, {"direct": (30000, 0.05, 0.4, None), "gateway": (3000, 0.30, 0.9, 0.18)}),
        case("chain-1", 1, {"direct": (30000, 0.05, 0.4, None), "gateway": (3000, 0.30, 0.9, 0.18)}),
        case("chain-64", 64, {"direct": (30000, 0.9, 2.0, None), "gateway": (8000, 8.0, 12.0, 0.19)}),
        case(
            "logs-1",
            1,
            {"gateway+nolog": (3000, 0.300, 0.9, 0.25), "gateway": (2950, 0.330, 0.9, 0.26)},
            section="check",
            base="gateway+nolog",
        ),
        case(
            "logs-64",
            64,
            {"gateway+nolog": (9000, 7.0, 12.0, 0.17), "gateway": (8500, 7.4, 12.5, 0.18)},
            section="check",
            base="gateway+nolog",
        ),
        case(
            "cache-miss-1",
            1,
            {"gateway": (3000, 0.300, 0.9, 0.25), "gateway+cache-miss": (3000, 0.305, 0.9, 0.25)},
            section="check",
            base="gateway",
        ),
        case(
            "capture-64",
            64,
            {"gateway": (9000, 7.0, 12.0, 0.17), "gateway+capture": (7500, 8.0, 14.0, 0.2)},
            section="capture",
            base="gateway",
        ),
    ]
    stream = {
        "key": "stream-chat",
        "title": "Chat → Chat stream",
        "targets": {},
        "first": {"direct": [0.1] * 3, "gateway": [0.5] * 3, "portkey": [25.2] * 3},
        "total": {"direct": [315.0] * 3, "gateway": [316.0] * 3, "portkey": [318.0] * 3},
        "first_p99": {},
        "note": "Portkey holds the first event",
    }
    args = {
        "runs": 3,
        "seconds": 5,
        "connections": 64,
        "workers": 2,
        "stream_requests": 25,
        "deltas": 64,
        "interval_ms": 5.0,
        "soak_seconds": 0,
        "soak_connections": 16,
    }
    data = {
        "meta": {
            "date": "2026-12-01 20:00 UTC",
            "git": "abc1234",
            "args": args,
            "argv": "",
            "capture_sink": "real writer",
            "captures": {"persisted": 12000, "dropped": 100500},
            "portkey": "1.15.2 (Node v20)",
        },
        "cases": cases,
        "streams": [stream],
        "memory": {"gateway": {"idle": [70.0, 71.0]}, "portkey": {"idle": [60.0]}},
        "soak": {},
        "profiles": [],
        "checks": {"cross-1/portkey": "HTTP 500: messages is not supported by openai"},
        "images": {
            "images": 20,
            "megapixels": 4.0,
            "seconds": 8,
            "errors": 0,
            "workers": 1,
            "runs": [
                {
                    "baseline_p50": 2.0,
                    "loaded_p50": 3.0,
                    "ratio": 1.5,
                    "images_done": 40,
                    "image_p50": 900.0,
                    "text_requests": [1, 1],
                }
            ]
            * 3,
        },
        "figures": {
            "streams-1000-first-p99": ["3.1 ms", True],
            "new-target": ["7 s", False, "a new target ≤ 5 s"],
            "new-target:why": ["it took longer", None],
        },
    }
    path = tmp_path / "results.json"
    path.write_text(json.dumps(data))
    return path


def rows(text: str, start: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith(start)]


def test_report_renders_targets_peers_and_checks(run, tmp_path):
    out = tmp_path / "RESULTS.md"
    run.write_report(out, run.load_results(fake_results(tmp_path)))
    text = out.read_text()
    assert (
        "| 20 | CPU per request, Chat → Chat, empty chain ≤ 0.15 ms (64 conn) | 0.120 (0.120–0.120) ms | **yes** |"
        in text
    )
    assert (
        "| 20 | ≥ 5× less CPU per request than Portkey (Chat → Chat, 64 conn) | 8.3 (8.3–8.3) × | **yes** |"
        in text
    )
    # LiteLLM at 3.0 ms is 25x the gateway's 0.12: missed, and diagnosed below the table
    assert (
        "| 20 | ≥ 30× less CPU per request than LiteLLM (Chat → Chat, 64 conn) | 25.0 (25.0–25.0) × | **NO** |"
        in text
    )
    missed = text.split("## Where a target is missed")[1].split("## ")[0]
    assert (
        "≥ 30× less CPU per request than LiteLLM" in missed
        and "LiteLLM spends 3.000 ms per request" in missed
    )
    assert (
        "| 20 | added p50 at 1 connection with the five-rule chain ≤ 0.2 ms | 0.250 (0.250–0.250) ms | **NO** |"
        in text
    )
    assert "| 20 | RSS of two idle workers ≤ 150 MB | 141.0 MB (70.0 + 71.0) | **yes** |" in text
    # the throughput ratio is met, and the row says how few of those requests were captured
    assert (
        "| 20 | capture on ≥ 80 % of capture-off throughput (64 conn) | 0.83 (0.83–0.83) ×; 11 % of the "
        "run's capture-on requests were captured, the writer shed the rest | **yes** |" in text
    )
    assert "Of 112500 capture-on requests, **12000 captures were persisted and 100500 dropped**" in text
    # placeholders other families fill: absent -> "not measured", supplied through bench.figures -> shown
    assert rows(text, "| 20 | agent-sized requests")[0].endswith("| not measured |")
    assert (
        "| 20 | 1,000 concurrent paced streams: no error, added first-byte p99 ≤ 5 ms | 3.1 ms | **yes** |"
        in text
    )
    # issue 17 / 15 / 16 checks
    assert (
        "| 17 | request logs on ≥ 90 % of off throughput (64 conn) | 0.94 (0.94–0.94) × | **yes** |" in text
    )
    assert "| 17 | request logs on add ≤ 0.05 ms p50 (1 conn) | 0.030 (0.030–0.030) ms | **yes** |" in text
    assert (
        "| 15 | seven cache transforms whose glob misses" in text
        and "0.005 (0.005–0.005) ms | **yes** |" in text
    )
    assert rows(text, "| 17 | per-key limits on add ≤ 0.1 ms p50, with Redis")[0].endswith("| not measured |")
    assert (
        "| 16 | text p50 within 2× of its idle value under 20 concurrent 4 MP compressions | 1.50 (1.50–1.50) × | **yes** |"
        in text
    )
    # the peers table: Portkey is one process, its CPU per request against the gateway's
    portkey = rows(text, "| Portkey | 1 Node process |")[0]
    assert "| 1.000 (1.000–1.000) | 8.3 (8.3–8.3)× | 0.100 (0.100–0.100) |" in portkey
    assert "Portkey left out: `HTTP 500: messages is not supported by openai`" in text
    assert "- Chat → Chat stream: Portkey holds the first event." in text
    assert rows(text, "| title of logs-64 | gateway+nolog | gateway |")
    # a target only a family knows: its row and its diagnosis
    assert "| 20 | a new target ≤ 5 s | 7 s | **NO** |" in text and "it took longer" in missed


def test_quick_fills_only_what_was_not_given(run):
    quick = run.parse_args(["--quick"])
    assert (quick.seconds, quick.runs, quick.soak_seconds, quick.no_profile, quick.no_tail) == (
        1.0,
        3,
        0.0,
        True,
        True,
    )
    assert run.parse_args(["--quick", "--seconds", "2"]).seconds == 2.0
    full = run.parse_args([])
    assert (full.seconds, full.runs, full.soak_seconds) == (5, 3, 600)


def make_bench(run, monkeypatch, tmp_path, argv: list[str]):
    monkeypatch.setattr(run, "BENCH", tmp_path)
    bench = run.Bench(run.parse_args(argv))
    bench.define_cases()
    return bench


def test_only_selects_cases_and_phases(run, monkeypatch, tmp_path):
    bench = make_bench(run, monkeypatch, tmp_path, ["--only", "^chat-"])
    assert [c.key for c in bench.cases] == ["chat-1", "chat-64"]
    assert not bench.check_cases and not bench.capture_cases and not bench.streams
    assert not bench.want("soak") and not bench.want("images")
    assert set(bench.cases[0].targets) == {"direct", "gateway", "litellm", "portkey"}
    checks = make_bench(run, monkeypatch, tmp_path, ["--only", "^(logs|limits)-"])
    assert {c.key for c in checks.check_cases} == {"logs-1", "logs-64", "limits-1", "limits-redis-1"}
    assert checks.server_of("gateway+redis+limits") is None  # variants exist only once started
    checks.servers["gateway+redis"] = object()
    assert checks.server_of("gateway+redis+limits") is checks.servers["gateway+redis"]
    assert checks.server_of("gateway+limits") is checks.gateway


def test_full_run_is_planned_under_45_minutes(run, monkeypatch, tmp_path):
    from harness import plan

    bench = make_bench(run, monkeypatch, tmp_path, [])
    total = sum(plan.estimate(bench).values())
    assert 30 * 60 < total < 45 * 60, plan.describe(bench)
