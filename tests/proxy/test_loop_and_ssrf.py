"""Issue 13: a request that comes back through the gateway is refused (508, the client's shape),
upstream requests carry the hop header, and the optional SSRF guard keeps channels off
loopback/private addresses."""

from __future__ import annotations

import pytest

from gateway.proxy.loopguard import HOP_HEADER
from gateway.proxy.netguard import address_blocked
from gateway.proxy.upstream import UpstreamClient
from gateway.wiring import build_proxy_app, instance_id

from .helpers import call, channel, provider, snapshot

pytestmark = pytest.mark.asyncio

CHAT_BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
MSG_BODY = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}


@pytest.fixture
async def app(upstream):
    proxy = build_proxy_app()
    proxy.holder.set(
        snapshot([provider(1, [channel(1, base_url=f"{upstream.base}/ok/v1", models={"m": "m"})])])
    )
    yield proxy
    await proxy.client.close()


async def test_upstream_requests_carry_our_hop_and_a_looped_request_is_508(app, upstream):
    reply = await call(app, "POST", "/v1/chat/completions", CHAT_BODY, headers={HOP_HEADER: "mg-other"})
    assert reply.status == 200, reply.body
    sent = {k.lower(): v for k, v in upstream.headers[-1].items()}
    assert sent[HOP_HEADER] == f"mg-other,{instance_id()}"  # another gateway before us is fine
    looped = await call(
        app, "POST", "/v1/chat/completions", CHAT_BODY, headers={HOP_HEADER: sent[HOP_HEADER]}
    )
    assert looped.status == 508 and looped.json()["error"]["code"] == "loop_detected"
    looped = await call(app, "POST", "/v1/messages", MSG_BODY, headers={HOP_HEADER: instance_id()})
    assert looped.status == 508 and looped.json()["type"] == "error"
    assert len(upstream.bodies) == 1  # the looped requests never went upstream


async def test_ssrf_guard_refuses_loopback_channels_when_on(upstream):
    proxy = build_proxy_app()
    proxy.client = proxy.runtime.client = UpstreamClient(ssrf_guard=True)
    try:
        for base in (f"{upstream.base}/ok/v1", f"http://localhost:{upstream.port}/ok/v1"):
            proxy.holder.set(
                snapshot([provider(1, [channel(1, base_url=base, models={"m": "m"})], breaker=False)])
            )
            reply = await call(proxy, "POST", "/v1/chat/completions", CHAT_BODY)
            assert reply.status == 502, reply.body
        assert upstream.bodies == []
    finally:
        await proxy.client.close()


@pytest.mark.filterwarnings("ignore")
def test_address_check():
    for ip in (
        "127.0.0.1",
        "10.1.2.3",
        "192.168.0.1",
        "169.254.169.254",
        "::1",
        "::ffff:127.0.0.1",
        "0.0.0.0",
        "fd00::1",
        "not-an-ip",
    ):
        assert address_blocked(ip), ip
    for ip in ("8.8.8.8", "2606:4700:4700::1111"):
        assert not address_blocked(ip), ip
