"""The collector settings a worker takes at start-up (``ProxyApp.startup``): what it allocated
until then is frozen, and the young generation's threshold is the configured one, so requests in
flight do not trigger a collection every 700 allocations (bench/TAIL.md)."""

from __future__ import annotations

import gc

import pytest

from gateway.proxy.app import ProxyApp
from gateway.proxy.config import ProxyConfig

from .test_readyz import FlakySource


@pytest.fixture
def collector():
    """Give the test process its collector back as it was."""
    before = gc.get_threshold()
    yield before
    gc.set_threshold(*before)
    gc.unfreeze()


async def started(config: ProxyConfig) -> None:
    app = ProxyApp(config, FlakySource(), lambda *a: None)
    await app.startup()
    await app.shutdown()


@pytest.mark.asyncio
async def test_startup_raises_the_young_generation_threshold_only(collector):
    gc.set_threshold(700, 10, 10)
    await started(ProxyConfig(config_poll_seconds=0.05, gc_gen0_threshold=7000))
    assert gc.get_threshold() == (7000, 10, 10)
    assert gc.get_freeze_count() > 0


@pytest.mark.asyncio
async def test_zero_keeps_pythons_own_threshold(collector):
    gc.set_threshold(700, 10, 10)
    await started(ProxyConfig(config_poll_seconds=0.05))
    assert gc.get_threshold() == (700, 10, 10)


def test_the_gateway_setting_reaches_the_proxy_config(settings):
    from gateway.wiring import proxy_config

    assert proxy_config().gc_gen0_threshold == 7000
    settings.GATEWAY = {**settings.GATEWAY, "GC_GEN0_THRESHOLD": "0"}
    assert proxy_config().gc_gen0_threshold == 0
