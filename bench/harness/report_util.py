"""Small pieces the report is built from: formatted figures, paired differences and ratios."""

from __future__ import annotations

from typing import Any

from .stats import Figure

NA = "n/a"


def fig(values: list[float] | None, digits: int = 2) -> str:
    return Figure.of(values).fmt(digits) if values else NA


def med(values: list[float] | None) -> float | None:
    return Figure.of(values).median if values else None


def paired(a: list[float] | None, b: list[float] | None) -> list[float] | None:
    """Per-run differences b - a (runs were interleaved, so run i of each saw the same box)."""
    if not a or not b:
        return None
    return [y - x for x, y in zip(a, b, strict=False)]


def paired_ratio(num: list[float] | None, den: list[float] | None) -> list[float] | None:
    """Per-run ratios num / den (run i of each was measured in the same minute)."""
    if not num or not den:
        return None
    out = [n / d for n, d in zip(num, den, strict=False) if d]
    return out or None


def ratio(num: float | None, den: float | None, digits: int = 1) -> str:
    if num is None or den is None or den == 0:
        return NA
    return f"{num / den:.{digits}f}×"


def series(case: Any, system: str, attr: str) -> list[float] | None:
    if case is None:
        return None
    runs = case.results.get(system)
    return [getattr(r, attr) for r in runs] if runs else None


def errors(case: Any) -> str:
    bad = {s: (sum(r.errors for r in runs), sum(r.non2xx for r in runs)) for s, runs in case.results.items()}
    bad = {s: v for s, v in bad.items() if v != (0, 0)}
    return "; ".join(f"{s}: {e} socket errors, {n} non-2xx" for s, (e, n) in bad.items())


def mb(values: list[float] | None) -> str:
    return f"{sum(values):.1f} ({' + '.join(f'{x:.1f}' for x in values)})" if values else NA


def capture_counts(bench: Any) -> tuple[int, int, int] | None:
    """(capture-on requests, captures persisted, captures dropped) of the run, or None when it
    has no capture case or no counts: at a load the capture writer cannot follow it sheds
    captures (``CAPTURE_WRITER_SHARE``), which the throughput ratio alone does not show."""
    counts = bench.meta.get("captures")
    asked = sum(r.requests for c in bench.capture_cases for r in c.results.get("gateway+capture", []))
    if not counts or not asked:
        return None
    return asked, counts["persisted"], counts["dropped"]
