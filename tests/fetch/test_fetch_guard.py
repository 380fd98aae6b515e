"""The outbound fetcher (gateway.fetch): the SSRF guard on every form of a forbidden address, on
redirects, the byte cap while streaming, timeouts, and the allow switches.

A small aiohttp server on 127.0.0.1 plays the remote host. For the redirect tests the guard is
told that 127.0.0.1 (only) is public, so the first hop is allowed and the redirect target is what
the guard judges.
"""

from __future__ import annotations

import asyncio
import ipaddress

import pytest
from aiohttp import web

from gateway import fetch
from gateway.fetch import Fetcher, FetchError, literal_address, refusal_reason

PNG = b"\x89PNG\r\n\x1a\n" + b"x" * 20


@pytest.fixture
async def server():
    hits: list[str] = []

    async def image(request):
        hits.append(request.path)
        return web.Response(body=PNG, headers={"Content-Type": "image/png; charset=x"})

    async def redirect(request):
        hits.append(request.path)
        raise web.HTTPFound(request.query["to"])

    async def chunked(request):
        hits.append(request.path)
        resp = web.StreamResponse(headers={"Content-Type": "application/octet-stream"})
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        for _ in range(10):
            await resp.write(b"y" * 1000)
        await resp.write_eof()
        return resp

    async def slow(request):
        hits.append(request.path)
        await asyncio.sleep(1.2)
        return web.Response(body=b"late")

    async def missing(request):
        hits.append(request.path)
        return web.Response(status=404, body=b"nope")

    app = web.Application()
    app.router.add_get("/a.png", image)
    app.router.add_get("/redirect", redirect)
    app.router.add_get("/chunked", chunked)
    app.router.add_get("/slow", slow)
    app.router.add_get("/missing", missing)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    yield {"url": f"http://127.0.0.1:{port}", "port": port, "hits": hits}
    await runner.cleanup()


@pytest.fixture
async def fetcher():
    f = Fetcher()
    yield f
    await f.close()


@pytest.fixture
def guard_on(monkeypatch):
    monkeypatch.setattr(fetch, "_process_allow", False)
    monkeypatch.setattr(fetch, "_setting_allow_private", False)


@pytest.fixture
def loopback_one_public(monkeypatch, guard_on):
    """127.0.0.1 counts as public for this test; every other forbidden address still is."""
    real = fetch.refusal_reason
    monkeypatch.setattr(
        fetch,
        "refusal_reason",
        lambda addr: None if addr == ipaddress.IPv4Address("127.0.0.1") else real(addr),
    )


# -- address classification ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "host,expected",
    [
        ("2130706433", "127.0.0.1"),
        ("0177.0.0.1", "127.0.0.1"),
        ("0x7f.1", "127.0.0.1"),
        ("127.1", "127.0.0.1"),
        ("[::ffff:127.0.0.1]", "::ffff:7f00:1"),
        ("example.com", None),
    ],
)
def test_literal_forms_decode_like_the_c_library(host, expected):
    addr = literal_address(host)
    assert (str(addr) if addr else None) == expected


@pytest.mark.parametrize(
    "addr",
    [
        "127.0.0.1",
        "10.1.2.3",
        "172.16.0.1",
        "192.168.1.1",
        "169.254.169.254",
        "224.0.0.1",
        "0.0.0.0",
        "100.64.0.1",
        "::1",
        "fe80::1",
        "fd00:ec2::254",
        "::ffff:127.0.0.1",
        "::ffff:10.0.0.1",
        "64:ff9b::7f00:1",
        "2002:7f00:1::",
        "ff02::1",
    ],
)
def test_forbidden_addresses(addr):
    assert refusal_reason(ipaddress.ip_address(addr))


@pytest.mark.parametrize("addr", ["93.184.216.34", "8.8.8.8", "2606:4700::1111", "::ffff:8.8.8.8"])
def test_public_addresses(addr):
    assert refusal_reason(ipaddress.ip_address(addr)) is None


# -- the guard on real fetches ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "host",
    [
        "127.0.0.1",
        "2130706433",
        "0177.0.0.1",
        "0x7f.0.0.1",
        "127.1",
        "[::ffff:127.0.0.1]",
        "[::1]",
        "localhost",
    ],
)
async def test_loopback_in_every_form_is_refused(server, fetcher, guard_on, host):
    with pytest.raises(FetchError) as info:
        await fetcher.fetch(f"http://{host}:{server['port']}/a.png", timeout=5, max_bytes=1000)
    assert info.value.reason == "address_refused"
    assert server["hits"] == []  # nothing reached the server


@pytest.mark.parametrize(
    "url",
    [
        "http://10.0.0.1/a.png",
        "http://192.168.0.1/a.png",
        "http://169.254.169.254/latest",
        "http://[fe80::1]/x",
        "http://224.0.0.1/x",
        "http://[fd00:ec2::254]/x",
    ],
)
async def test_private_link_local_metadata_multicast_refused(fetcher, guard_on, url):
    with pytest.raises(FetchError) as info:
        await fetcher.fetch(url, timeout=5, max_bytes=1000)
    assert info.value.reason == "address_refused"


async def test_non_http_schemes_refused(fetcher, guard_on):
    for url in ("file:///etc/passwd", "ftp://example.com/x", "gopher://example.com/"):
        with pytest.raises(FetchError) as info:
            await fetcher.fetch(url, timeout=5, max_bytes=1000)
        assert info.value.reason == "scheme_refused"


async def test_env_switch_allows_loopback(server, fetcher, monkeypatch):
    monkeypatch.setattr(fetch, "_process_allow", True)
    got = await fetcher.fetch(f"{server['url']}/a.png", timeout=5, max_bytes=1000)
    assert got.body == PNG
    assert got.content_type == "image/png"


async def test_global_setting_allows_loopback(server, fetcher, monkeypatch):
    monkeypatch.setattr(fetch, "_process_allow", False)
    monkeypatch.setattr(fetch, "_setting_allow_private", True)
    got = await fetcher.fetch(f"http://localhost:{server['port']}/a.png", timeout=5, max_bytes=1000)
    assert got.body == PNG


# -- redirects -------------------------------------------------------------------------------------


async def test_redirect_to_an_allowed_target_is_followed(server, fetcher, loopback_one_public):
    got = await fetcher.fetch(f"{server['url']}/redirect?to=/a.png", timeout=5, max_bytes=1000)
    assert got.body == PNG
    assert got.url.endswith("/a.png")
    assert server["hits"] == ["/redirect", "/a.png"]


@pytest.mark.parametrize(
    "target",
    [
        "http://127.0.0.2:{port}/a.png",
        "http://2130706434:{port}/a.png",
        "http://0177.0.0.2:{port}/a.png",
        "http://[::ffff:127.0.0.2]:{port}/a.png",
        "http://169.254.169.254/latest/meta-data",
        "http://10.0.0.1/",
        "file:///etc/passwd",
    ],
)
async def test_redirect_to_a_forbidden_target_is_refused(server, fetcher, loopback_one_public, target):
    to = target.format(port=server["port"])
    with pytest.raises(FetchError) as info:
        await fetcher.fetch(f"{server['url']}/redirect?to={to}", timeout=5, max_bytes=1000)
    assert info.value.reason in ("address_refused", "scheme_refused")
    assert server["hits"] == ["/redirect"]


async def test_redirect_loop_stops(server, fetcher, loopback_one_public):
    with pytest.raises(FetchError) as info:
        await fetcher.fetch(
            f"{server['url']}/redirect?to=/redirect%3Fto%3D/redirect",
            timeout=5,
            max_bytes=1000,
            max_redirects=3,
        )
    assert info.value.reason in ("too_many_redirects", "status")


# -- limits and failures ----------------------------------------------------------------------------


async def test_byte_cap_enforced_while_streaming(server, fetcher, monkeypatch):
    monkeypatch.setattr(fetch, "_process_allow", True)
    with pytest.raises(FetchError) as info:
        await fetcher.fetch(f"{server['url']}/chunked", timeout=5, max_bytes=2500)
    assert info.value.reason == "too_large"
    got = await fetcher.fetch(f"{server['url']}/chunked", timeout=5, max_bytes=10000)
    assert len(got.body) == 10000


async def test_content_length_over_cap_refused(server, fetcher, monkeypatch):
    monkeypatch.setattr(fetch, "_process_allow", True)
    with pytest.raises(FetchError) as info:
        await fetcher.fetch(f"{server['url']}/a.png", timeout=5, max_bytes=10)
    assert info.value.reason == "too_large"


async def test_timeout_and_status(server, fetcher, monkeypatch):
    monkeypatch.setattr(fetch, "_process_allow", True)
    with pytest.raises(FetchError) as info:
        await fetcher.fetch(f"{server['url']}/slow", timeout=0.3, max_bytes=1000)
    assert info.value.reason == "timeout"
    with pytest.raises(FetchError) as info:
        await fetcher.fetch(f"{server['url']}/missing", timeout=5, max_bytes=1000)
    assert info.value.reason == "status"


async def test_fetch_many_runs_concurrently(server, fetcher, monkeypatch):
    monkeypatch.setattr(fetch, "_process_allow", True)
    loop = asyncio.get_running_loop()
    t = loop.time()
    urls = [f"{server['url']}/slow?{i}" for i in range(4)] + [f"{server['url']}/a.png"]
    got = await fetcher.fetch_many(urls, timeout=0.5, max_bytes=1000)
    assert loop.time() - t < 1.5  # four 0.5 s timeouts side by side, not one after the other
    assert isinstance(got[urls[0]], FetchError)
    assert got[urls[-1]].body == PNG


# -- channel base URLs (guard_channel_urls) ---------------------------------------------------------


async def test_channel_guard_off_by_default_and_clear_error_when_on(server, monkeypatch):
    from gateway.proxy.errors import transport_failure as _transport_failure
    from gateway.proxy.upstream import TRANSPORT_ERRORS, UpstreamClient

    client = UpstreamClient()
    try:
        monkeypatch.setattr(fetch, "_setting_guard_channels", False)
        async with client.post(
            f"http://localhost:{server['port']}/a.png", b"", {}, total=5, connect=5, sock_read=5
        ) as resp:
            assert resp.status == 405  # reached the host (GET-only route): no guard
        monkeypatch.setattr(fetch, "_setting_guard_channels", True)
        with pytest.raises(fetch.AddressRefused) as info:
            client.post(f"{server['url']}/a.png", b"", {}, total=5, connect=5, sock_read=5)
        failed = _transport_failure(info.value)
        assert failed.code == "upstream_address_refused"
        assert "guard_channel_urls" in failed.message and "loopback" in failed.message
        await client.close()  # a fresh pool: no DNS answer cached from the unguarded call
        with pytest.raises(TRANSPORT_ERRORS) as info:  # a name resolving to loopback: the resolver refuses
            async with client.post(
                f"http://localhost:{server['port']}/a.png", b"", {}, total=5, connect=5, sock_read=5
            ):
                pass
        assert _transport_failure(info.value).code == "upstream_address_refused"
        assert server["hits"] == []
    finally:
        await client.close()


@pytest.mark.django_db
def test_channel_save_refused_with_a_clear_error_when_the_guard_is_on():
    from django.core.exceptions import ValidationError

    from gateway.models import GlobalSettings
    from providers.models import Channel, Provider

    provider = Provider.objects.create(name="guarded")
    channel = Channel(
        provider=provider, name="local", protocol="chat_completion", base_url="http://127.0.0.1:9/v1"
    )
    channel.set_api_key("sk-x")
    channel.full_clean()  # guard off (the default): private hosts are fine for channels
    gs = GlobalSettings.load()
    gs.guard_channel_urls = True
    gs.save()
    for url in ("http://127.0.0.1:9/v1", "http://2130706433/v1", "http://localhost:9/v1", "http://[::1]/v1"):
        channel.base_url = url
        with pytest.raises(ValidationError) as info:
            channel.full_clean()
        assert "guard_channel_urls is on" in str(info.value.message_dict["base_url"])
    channel.base_url = "http://93.184.216.34/v1"
    channel.full_clean()
