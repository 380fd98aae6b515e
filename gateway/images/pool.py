"""The thread pool image work runs on, so decoding or re-encoding a large image never stalls the
event loop (Pillow releases the GIL inside its codecs, so the work really runs beside the loop).

Sized for the machine: one worker per CPU (``os.cpu_count()``), overridable with
the ``IMAGE_WORKERS`` knob (``GATEWAY_IMAGE_WORKERS``). The pool is also the concurrency limit: at most that many images
are decoded at once per process, whatever the number of requests carrying images.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")

_pool: ThreadPoolExecutor | None = None


def workers() -> int:
    from gateway.conf import gateway_settings

    configured = int(gateway_settings.IMAGE_WORKERS)
    return configured if configured > 0 else max(1, os.cpu_count() or 1)


def pool() -> ThreadPoolExecutor:
    global _pool
    if _pool is None:
        _pool = ThreadPoolExecutor(max_workers=workers(), thread_name_prefix="gateway-image")
    return _pool


async def run(fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)`` on the image pool, awaited from the event loop."""
    return await asyncio.get_running_loop().run_in_executor(pool(), fn, *args)
