"""The pool image work runs on, so decoding or re-encoding a large image never stalls the event
loop.

By default a *process* pool (``forkserver`` start method: never a fork of the running worker and
its threads). Measured on this 2-CPU box with six 4-megapixel JPEGs re-encoded while the loop
ticks every millisecond: with a thread pool the loop stalled up to 137 ms (p99 45 ms), because
base64, Pillow's Python-level decode loop and EXIF handling hold the GIL; with a process pool
the longest stall was 32 ms (p99 10 ms) on the same, heavily shared, machine. The knob
``IMAGE_POOL=thread`` (``GATEWAY_IMAGE_POOL``) selects threads (tests that spy on the work use
it). Functions sent here must be module-level and their arguments and results picklable.

The worker processes run at a lower priority (``IMAGE_NICE``, default +10): on a busy machine
the kernel gives the CPU to the event loops first, so small requests keep their latency while
images queue (issue 16: with the loop freed of body parsing, what was left of the text p50's
rise under 20 image clients was the pool's workers taking the CPU from the loop).

Sized for the machine: one worker per CPU but one (``os.cpu_count() - 1``, at least 1), so the
event loop keeps a CPU; ``IMAGE_WORKERS`` overrides. The pool is also the concurrency limit: at
most that many images are worked on at once per server process.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
from collections.abc import Callable
from concurrent.futures import BrokenExecutor, Executor, ProcessPoolExecutor, ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")

_pool: Executor | None = None
_kind_override: str | None = None  # tests: "thread" or "process"


def workers() -> int:
    from gateway.conf import gateway_settings

    configured = int(gateway_settings.IMAGE_WORKERS)
    return configured if configured > 0 else max(1, (os.cpu_count() or 1) - 1)


def kind() -> str:
    if _kind_override:
        return _kind_override
    from gateway.conf import gateway_settings

    return "thread" if str(gateway_settings.IMAGE_POOL).strip().lower() == "thread" else "process"


def nice() -> int:
    from gateway.conf import gateway_settings

    return max(0, int(gateway_settings.IMAGE_NICE))


def _lower_priority(increment: int) -> None:
    """A worker process's initializer: give way to the event loops (``IMAGE_NICE``)."""
    if increment > 0:
        try:
            os.nice(increment)
        except OSError:  # not allowed here: the worker runs at the server's priority
            pass


def pool() -> Executor:
    global _pool
    if _pool is None:
        if kind() == "thread":
            _pool = ThreadPoolExecutor(max_workers=workers(), thread_name_prefix="gateway-image")
        else:
            _pool = ProcessPoolExecutor(
                max_workers=workers(),
                mp_context=multiprocessing.get_context("forkserver"),
                initializer=_lower_priority,
                initargs=(nice(),),
            )
    return _pool


def use(new_kind: str | None) -> None:
    """Switch the pool kind (tests); the next ``run`` builds a fresh pool."""
    global _kind_override, _pool
    old, _pool = _pool, None
    _kind_override = new_kind
    if old is not None:
        old.shutdown(wait=False, cancel_futures=True)


class PoolBroken(RuntimeError):
    """A worker process died (killed for memory, crashed in a codec): the pool is rebuilt for
    the next call and the caller leaves its image as it was."""


async def run(fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)`` on the image pool, awaited from the event loop."""
    global _pool
    executor = pool()
    try:
        return await asyncio.get_running_loop().run_in_executor(executor, fn, *args)
    except BrokenExecutor as exc:
        if _pool is executor:
            _pool = None
            executor.shutdown(wait=False, cancel_futures=True)
        raise PoolBroken(f"image worker failed: {type(exc).__name__}") from None


def shutdown() -> None:
    global _pool
    if _pool is not None:
        _pool.shutdown(wait=False, cancel_futures=True)
        _pool = None
