"""What a benchmark case is, and how the case families register theirs.

A *case* is one row of the report: the same request shape sent to each *system* that can serve it
(``direct`` = the upstream itself, ``gateway``, the peers ``litellm`` and ``portkey``, or a variant
of the gateway such as ``gateway+nolog``), with ``--runs`` interleaved wrk runs per system. A
*stream case* times first byte and total time of paced SSE streams instead.

Cases live in families, one module each (``cases_core.py``: the side-by-side peer comparison;
``cases_checks.py``: the gateway-only on-vs-off checks of issues 15 and 17). A family is a module
with ``define(bench)`` that appends to ``bench.cases`` (main tables), ``bench.streams``,
``bench.capture_cases`` or ``bench.check_cases``; to add one, write the module and list it in
``run.FAMILIES``. ``--only PATTERN`` then keeps the cases whose key matches.

A family may also define ``run_phase(bench)``: called with the servers up, after the checks, for
measurements that are not wrk cases (e.g. 1,000 concurrent streams); it checks
``bench.want(<its phase name>)`` itself so ``--only`` can pick it, and ``estimate_seconds(bench)``
adds its time to the plan printed at start. It keeps its raw data in
``bench.extra[name]`` (saved in ``results.json``) and reports against a target of the table with
``bench.figures[target_id] = (measured text, met)`` and optionally ``bench.figures[target_id +
":why"] = (diagnosis, None)``. The target ids waiting for a figure (``report_targets.py``):
``streams-1000-first-p99``, ``streams-1000-rss``, ``worker-split``. The 1 MB agent targets are
read from the cases whose key starts with ``agent-`` at one connection (added p50 ≤ 5 ms, with
``direct`` as the base).

System names: a name the bench has a server for (``bench.servers``) is served by it; otherwise the
part before ``+`` is (``gateway+capture`` is the main gateway asked with the capture key). A
variant that needs its own process (another environment) is registered with
``bench.add_variant(name, env)`` and started only when a selected case uses it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from . import wrk

# The order systems appear in tables; anything else (variants) follows in case order.
SYSTEMS = ("direct", "gateway", "litellm", "portkey")
PEERS = ("litellm", "portkey")
LABELS = {"direct": "direct", "gateway": "gateway", "litellm": "LiteLLM", "portkey": "Portkey"}


@dataclass
class Case:
    """One row of the report: the same request shape against each system that supports it."""

    key: str
    title: str
    connections: int
    targets: dict[str, wrk.WrkRequest]
    results: dict[str, list[wrk.WrkResult]] = field(default_factory=dict)
    note: str = ""
    settle: bool = False  # wait for the server to go idle before each run, record the wait after it
    drain: dict[str, list[float]] = field(default_factory=dict)
    cpu_ms: dict[str, list[float]] = field(default_factory=dict)  # server processes' CPU per request
    section: str = "main"  # main | capture | check: which part of the report shows it
    base: str = "direct"  # what "added" is measured against (a check compares gateway variants)


@dataclass
class StreamCase:
    key: str
    title: str
    targets: dict[str, tuple[int, str, bytes, dict[str, str]]]
    first: dict[str, list[float]] = field(default_factory=dict)  # per-run p50 first byte
    total: dict[str, list[float]] = field(default_factory=dict)  # per-run p50 total
    first_p99: dict[str, list[float]] = field(default_factory=dict)
    note: str = ""


def base_system(system: str) -> str:
    return system.split("+", 1)[0]


def label(system: str) -> str:
    return LABELS.get(system, system)
