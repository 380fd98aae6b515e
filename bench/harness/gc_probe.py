"""The gateway's ASGI app with a garbage-collector probe, for ``bench/diagnose_tail.py`` only.

The main benchmark serves ``gateway.asgi:application`` untouched; the tail diagnosis serves this
module instead (``uvicorn harness.gc_probe:application``). Each worker records every collection
(wall time, generation, pause) and writes the last minute of them to
``$GC_PROBE_DIR/gc-<pid>.json`` once a second. ``GC_PROBE_THRESHOLD=a,b,c`` tries other
collector thresholds (the worker's start-up then sets the first from
``GATEWAY_GC_GEN0_THRESHOLD``, which ``bench/diagnose_tail.py`` sets to ``a`` as well).
"""

from __future__ import annotations

import collections
import gc
import os
import threading
import time
from pathlib import Path

import orjson

from gateway.asgi import application  # noqa: F401  (what uvicorn serves)

_pauses: collections.deque[tuple[float, int, float]] = collections.deque(maxlen=200_000)
_start = [0.0]


def _callback(phase: str, info: dict) -> None:
    if phase == "start":
        _start[0] = time.perf_counter()
    else:
        _pauses.append((time.time(), info["generation"], (time.perf_counter() - _start[0]) * 1000))


def _dump_loop(path: Path) -> None:
    while True:
        time.sleep(1)
        cutoff = time.time() - 60
        path.write_bytes(orjson.dumps([p for p in list(_pauses) if p[0] >= cutoff]))


# Experiment: other collector thresholds ("a,b,c").
if os.environ.get("GC_PROBE_THRESHOLD"):
    gc.set_threshold(*(int(x) for x in os.environ["GC_PROBE_THRESHOLD"].split(",")))

if os.environ.get("GC_PROBE_DIR"):
    gc.callbacks.append(_callback)
    threading.Thread(
        target=_dump_loop, args=(Path(os.environ["GC_PROBE_DIR"]) / f"gc-{os.getpid()}.json",), daemon=True
    ).start()
