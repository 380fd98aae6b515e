"""Median-of-runs arithmetic: every figure in the report is the median of the runs, with the
spread (min–max) beside it."""

from __future__ import annotations

import statistics
from dataclasses import dataclass


@dataclass
class Figure:
    median: float
    low: float
    high: float

    @classmethod
    def of(cls, values: list[float]) -> Figure:
        return cls(statistics.median(values), min(values), max(values))

    def fmt(self, digits: int = 2, unit: str = "") -> str:
        return f"{self.median:.{digits}f}{unit} ({self.low:.{digits}f}–{self.high:.{digits}f})"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]
