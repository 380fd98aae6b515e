"""The /metrics guard: loopback (or an allow-listed network) or the bearer token; anything else
gets 403 before a single metric is rendered."""

from __future__ import annotations

import asyncio

from gateway.observe.metrics import MetricsApp, parse_cidrs, scrape_allowed

LOOPBACK = parse_cidrs("127.0.0.0/8,::1/128")


def test_loopback_allowed_without_token():
    assert scrape_allowed("127.0.0.1", None, allow=LOOPBACK, token="")
    assert scrape_allowed("::1", None, allow=LOOPBACK, token="")


def test_other_addresses_refused_without_token():
    assert not scrape_allowed("10.1.2.3", None, allow=LOOPBACK, token="")
    assert not scrape_allowed("10.1.2.3", "Bearer anything", allow=LOOPBACK, token="")  # no token configured
    assert not scrape_allowed(None, None, allow=LOOPBACK, token="s3cret")
    assert not scrape_allowed("not-an-ip", None, allow=LOOPBACK, token="")


def test_token_and_allow_list():
    assert scrape_allowed("10.1.2.3", "Bearer s3cret", allow=LOOPBACK, token="s3cret")
    assert scrape_allowed("10.1.2.3", "bearer s3cret", allow=LOOPBACK, token="s3cret")
    assert not scrape_allowed("10.1.2.3", "Bearer wrong", allow=LOOPBACK, token="s3cret")
    assert not scrape_allowed("10.1.2.3", "Basic s3cret", allow=LOOPBACK, token="s3cret")
    assert scrape_allowed("10.1.2.3", None, allow=parse_cidrs("10.0.0.0/8"), token="")


def _call(app: MetricsApp, client: str, headers: list[tuple[bytes, bytes]] = ()) -> tuple[int, bytes]:
    sent: list[dict] = []

    async def send(message):
        sent.append(message)

    scope = {
        "type": "http",
        "method": "GET",
        "path": "/metrics",
        "client": (client, 5555),
        "headers": list(headers),
    }
    asyncio.run(app(scope, None, send))
    return sent[0]["status"], sent[1]["body"]


def test_app_refuses_a_remote_peer_without_token_and_serves_with_it():
    app = MetricsApp(allow=LOOPBACK, token="s3cret")
    status, body = _call(app, "192.0.2.7")
    assert status == 403 and b"gateway_requests" not in body
    status, body = _call(app, "192.0.2.7", [(b"authorization", b"Bearer s3cret")])
    assert status == 200 and b"gateway_requests_total" in body
    status, _ = _call(app, "127.0.0.1")
    assert status == 200


def test_a_scrape_relayed_by_a_trusted_proxy_is_judged_by_its_client():
    """A local reverse proxy connects from loopback: the client its X-Forwarded-For names decides,
    so the proxy does not open /metrics to everyone behind it; an untrusted peer's header is
    ignored, and with no trusted proxy the peer alone counts."""
    app = MetricsApp(allow=LOOPBACK, token="s3cret", trusted=LOOPBACK)
    relayed = [(b"x-forwarded-for", b"203.0.113.5")]
    assert _call(app, "127.0.0.1", relayed)[0] == 403
    assert _call(app, "127.0.0.1", [*relayed, (b"authorization", b"Bearer s3cret")])[0] == 200
    assert _call(app, "127.0.0.1", [(b"x-forwarded-for", b"127.0.0.1")])[0] == 200
    assert _call(app, "192.0.2.7", [(b"x-forwarded-for", b"127.0.0.1")])[0] == 403
    assert _call(MetricsApp(allow=LOOPBACK, token=""), "127.0.0.1", relayed)[0] == 200
