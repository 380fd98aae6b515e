"""How long a run will take, printed before it starts (and compared with the real time at the end).

The figures are what each phase costs on a 2-core box: a wrk run is ``--seconds`` plus its
start-up, a stream is ``deltas × interval`` plus a little, servers take their start-up time. Tool
installation (apt, pip, npm) on a fresh machine comes on top (a few minutes, once).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import images

if TYPE_CHECKING:  # pragma: no cover
    from run import Bench

WRK_OVERHEAD = 0.4  # wrk start-up, Lua script, /proc reads, per run
SETTLE = 3.0  # waiting for the capture writer to go idle, before and after a run
START = {"gateway": 15.0, "litellm": 60.0, "portkey": 5.0, "variant": 15.0}


def estimate(b: Bench) -> dict[str, float]:
    a = b.args
    wrk_run = a.seconds + WRK_OVERHEAD
    phases: dict[str, float] = {}
    used = b.used_systems()
    variants = sum(1 for name in b.variant_env if any(s == name or s.startswith(name + "+") for s in used))
    phases["start-up"] = (
        START["gateway"]
        + START["variant"] * variants
        + (START["litellm"] if b.litellm is not None and "litellm" in used else 0)
        + (START["portkey"] if b.portkey is not None and "portkey" in used else 0)
    )
    for label, cases in (("cases", b.cases), ("checks", b.check_cases), ("capture", b.capture_cases)):
        runs = sum(len(c.targets) for c in cases) * a.runs
        warm = sum(len(c.targets) for c in cases if c.section == "check") * (1 + WRK_OVERHEAD)
        phases[label] = runs * (wrk_run + (2 * SETTLE if any(c.settle for c in cases) else 0)) + warm
    stream = (a.deltas - 1) * a.interval_ms / 1000 + 0.03
    phases["streams"] = sum(len(s.targets) for s in b.streams) * a.runs * a.stream_requests * stream
    if b.capture_cases:
        phases["capture"] += 12
    if not a.no_profile and b.want("profile") and any(c.key == f"chat-{a.connections}" for c in b.cases):
        phases["profile"] = wrk_run + 3
    for family in getattr(b, "families", ()):
        own = getattr(family, "estimate_seconds", None)
        if own is not None:
            phases[family.__name__.rsplit(".", 1)[-1]] = own(b)
    if a.soak_seconds > 0 and b.want("soak"):
        phases["soak"] = a.soak_seconds + 10
    if not a.no_images and b.want("images"):
        phases["images"] = images.estimate_seconds(a)
    if not a.no_tail and b.want("tail"):
        phases["tail diagnosis"] = 2 * (20 + a.runs * wrk_run)
    return phases


def describe(b: Bench) -> str:
    phases = estimate(b)
    total = sum(phases.values())
    parts = ", ".join(f"{name} {secs / 60:.1f}" for name, secs in phases.items() if secs)
    n = len(b.cases) + len(b.check_cases) + len(b.capture_cases) + len(b.streams)
    return (
        f"plan: {n} cases, {b.args.runs} runs each, {b.args.seconds:g} s wrk runs; estimated "
        f"{total / 60:.0f} min ({parts} min; tool installs not counted)"
    )
