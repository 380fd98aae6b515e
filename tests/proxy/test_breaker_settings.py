"""Issue 13: breaker thresholds are provider settings with global defaults, and a channel's
breaker state is cleared when its channel or provider changes."""

from __future__ import annotations

import dataclasses

import pytest

from .helpers import call, channel, provider, snapshot

pytestmark = pytest.mark.asyncio

BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


async def test_provider_threshold_overrides_the_global_default(app, upstream):
    strict = dataclasses.replace(
        provider(1, [channel(1, base_url=f"{upstream.base}/s500/v1", models={"m": "m"})], max_retries=0),
        breaker_failures=1,
        breaker_cooldown=5.0,
    )
    lenient = provider(
        2, [channel(2, base_url=f"{upstream.base}/s500/v1", models={"m": "m"})], max_retries=0, priority=1
    )
    app.holder.set(snapshot([strict, lenient]))
    reply = await call(app, "POST", "/v1/chat/completions", BODY)
    assert reply.status == 502
    assert app.breaker.state(1) == "open"  # one failure is enough for this provider
    assert app.breaker.state(2) == "closed"  # the global default (3) still applies to the other


async def test_changing_a_channel_clears_its_breaker(app, upstream):
    ch1 = channel(1, base_url=f"{upstream.base}/ok/v1", models={"m": "m"})
    ch2 = channel(2, base_url=f"{upstream.base}/ok/v1", models={"m": "m"})
    app.holder.set(snapshot([provider(1, [ch1, ch2])]))
    for cid in (1, 2):
        for _ in range(3):
            app.breaker.record_failure(cid)
        assert app.breaker.state(cid) == "open"
    fixed = dataclasses.replace(ch1, base_url=f"{upstream.base}/ok/v2")
    app.holder.set(snapshot([provider(1, [fixed, ch2])]))
    assert app.breaker.state(1) == "closed"  # its configuration changed: the old verdict is void
    assert app.breaker.state(2) == "open"  # untouched channel keeps its state
