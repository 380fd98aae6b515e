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
    settle: bool = False   # wait for the server to go idle before each run, record the wait after it
    drain: dict[str, list[float]] = field(default_factory=dict)
    cpu_ms: dict[str, list[float]] = field(default_factory=dict)   # server processes' CPU per request
    section: str = "main"  # main | capture | check: which part of the report shows it
    base: str = "direct"   # what "added" is measured against (a check compares gateway variants)


@dataclass
class StreamCase:
    key: str
    title: str
    targets: dict[str, tuple[int, str, bytes, dict[str, str]]]
    first: dict[str, list[float]] = field(default_factory=dict)   # per-run p50 first byte
    total: dict[str, list[float]] = field(default_factory=dict)   # per-run p50 total
    first_p99: dict[str, list[float]] = field(default_factory=dict)
    note: str = ""


def base_system(system: str) -> str:
    return system.split("+", 1)[0]


def label(system: str) -> str:
    return LABELS.get(system, system)
