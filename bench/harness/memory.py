"""Resident memory of a server's workers, sampled in a background thread while load runs."""

from __future__ import annotations

import threading

from .procs import rss_mb, worker_pids


def workers_rss(master: int) -> list[float]:
    return [rss_mb(p) for p in worker_pids(master)]


class Sampler:
    """Samples the sum of the workers' RSS every ``every`` seconds; ``peak`` is the highest sum."""

    def __init__(self, master: int, every: float = 0.5) -> None:
        self.master = master
        self.every = every
        self.peak = 0.0
        self.peak_per_worker: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            per = workers_rss(self.master)
            if sum(per) > self.peak:
                self.peak, self.peak_per_worker = sum(per), per

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
