"""Resident memory of a server's serving processes, sampled in a background thread while load runs."""

from __future__ import annotations

import threading
from collections.abc import Callable

from .procs import pss_mb, rss_mb, worker_pids


def workers_rss(master: int) -> list[float]:
    return [rss_mb(p) for p in worker_pids(master)]


def rss_of(pids: list[int]) -> list[float]:
    return [rss_mb(p) for p in pids]


def pss_of(pids: list[int]) -> list[float]:
    return [pss_mb(p) for p in pids]


class Sampler:
    """Samples the sum of the serving processes' RSS every ``every`` seconds; ``peak`` is the
    highest sum. ``source`` is a master pid (its workers are sampled) or a callable giving the pids
    (a server that is its own single process, like Portkey's node)."""

    def __init__(self, source: int | Callable[[], list[int]], every: float = 0.5) -> None:
        self.pids = source if callable(source) else (lambda: worker_pids(source))
        self.every = every
        self.peak = 0.0
        self.peak_per_worker: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            per = rss_of(self.pids())
            if sum(per) > self.peak:
                self.peak, self.peak_per_worker = sum(per), per

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
