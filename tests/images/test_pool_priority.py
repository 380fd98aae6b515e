"""The image pool's worker processes run at a lower priority than the server (``IMAGE_NICE``),
so on a busy machine the event loops get the CPU first and small requests keep their latency
while images queue (issue 16)."""

from __future__ import annotations

import os

import pytest

from gateway.images import pool

pytestmark = pytest.mark.asyncio


async def test_process_pool_workers_are_niced_below_the_server():
    pool.use("process")
    try:
        worker_nice = await pool.run(os.nice, 0)
    finally:
        pool.use(None)
    assert pool.nice() == 10  # the default
    assert worker_nice == min(19, os.nice(0) + pool.nice())
