"""Fixtures shared by the proxy tests: the in-process fake upstream and a proxy app built the way
the server builds it."""

from __future__ import annotations

import pytest

from gateway.wiring import build_proxy_app

from .helpers import FakeUpstream


@pytest.fixture
async def upstream():
    up = FakeUpstream()
    await up.start()
    yield up
    await up.stop()


@pytest.fixture
async def app():
    proxy = build_proxy_app()
    yield proxy
    await proxy.client.close()
