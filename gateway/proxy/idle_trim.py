"""Memory back to the system once a worker goes idle after a burst (issue 20).

A burst (1,000 concurrent streams) leaves a worker's resident memory at its high-water mark:
CPython's allocator keeps partly used arenas and glibc's malloc keeps freed heap pages rather
than returning them. Nothing is leaked, but a long-running worker's RSS never comes back down.
So the worker counts the requests it serves; a check every ``interval`` seconds finds when it
served requests since the last trim, none is in progress and none arrived during the whole last
interval, and then runs a full collection and glibc's ``malloc_trim(0)`` once. The request path
pays two integer updates; the trim runs only when nothing is waiting for the loop.
"""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import Callable

log = logging.getLogger("gateway.proxy")

INTERVAL_SECONDS = 10.0


def _load_malloc_trim() -> Callable[[], int] | None:
    """glibc's ``malloc_trim(0)``, or None where the C library has none (musl, macOS). ctypes is
    imported here, at the first trim, not at start-up (it is 0.4 MB of each worker's RSS)."""
    import ctypes

    try:
        fn = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_size_t]
    fn.restype = ctypes.c_int
    return lambda: fn(0)


_malloc_trim: Callable[[], int] | None | bool = False  # False: not loaded yet


def trim_heap() -> bool:
    """Give glibc's freed heap back to the system; False where there is no ``malloc_trim``.
    Shared by this idle check and the connection-burst trim in ``gateway.serving``."""
    global _malloc_trim
    if _malloc_trim is False:
        _malloc_trim = _load_malloc_trim()
    if callable(_malloc_trim):
        _malloc_trim()
        return True
    return False


class IdleTrim:
    """``active``/``served`` are kept by the proxy app around every HTTP request; ``check`` is
    the idle test and the trim, ``run`` calls it every ``interval`` seconds."""

    __slots__ = ("active", "served", "interval", "trims", "_seen", "_trimmed_at")

    def __init__(self, interval: float = INTERVAL_SECONDS) -> None:
        self.active = 0
        self.served = 0
        self.interval = interval
        self.trims = 0
        self._seen = 0  # ``served`` at the previous check
        self._trimmed_at = 0  # ``served`` at the last trim

    def check(self) -> bool:
        """Trim when idle after activity; True when it did."""
        served = self.served
        quiet = served == self._seen  # no request arrived during the whole last interval
        self._seen = served
        if self.active or not quiet or served == self._trimmed_at:
            return False
        self._trimmed_at = served
        gc.collect()
        trim_heap()
        self.trims += 1
        return True

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            try:
                self.check()
            except Exception:  # never let the check end the loop
                log.exception("idle memory trim failed")
