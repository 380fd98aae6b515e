"""The lean upstream client (``gateway.proxy.h1client``) against real sockets: aiohttp's web
server for well-formed answers, raw asyncio servers for the awkward ones (a close mid-answer,
a body delimited by the close, silence, garbage). Request in, bytes out."""

from __future__ import annotations

import asyncio
import gzip
import zlib

import aiohttp
import pytest
from aiohttp import web

from gateway.proxy import h1client, h1response
from gateway.proxy.upstream import TRANSPORT_ERRORS, UpstreamClient

from .helpers import serve_post

pytestmark = pytest.mark.unit


async def _raw(answer):
    """A raw server: ``answer(reader, writer)`` per connection; returns (server, port, peers)."""
    peers = []

    async def on_conn(reader, writer):
        peers.append(writer.get_extra_info("peername"))
        try:
            await answer(reader, writer)
        finally:
            writer.close()

    server = await asyncio.start_server(on_conn, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1], peers


async def _read_request(reader) -> tuple[bytes, bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":", 1)[1])
    return head, await reader.readexactly(length)


def client() -> UpstreamClient:
    return UpstreamClient(impl="h1")


async def test_post_sends_the_body_and_headers_and_reuses_the_connection():
    seen = []

    async def handler(request):
        seen.append(
            (dict(request.headers), await request.read(), request.transport.get_extra_info("peername"))
        )
        return web.json_response({"ok": len(seen)}, headers={"x-up": "1"})

    runner, port = await serve_post(handler)
    c = client()
    try:
        for n in (1, 2):
            async with c.post(
                f"http://127.0.0.1:{port}/v1/chat?x=1",
                b'{"a":1}',
                {"Authorization": "Bearer k"},
                total=5,
                connect=5,
                sock_read=None,
            ) as resp:
                assert resp.status == 200 and resp.content_type == "application/json"
                assert resp.headers["X-Up"] == "1" and await resp.read() == b'{"ok": %d}' % n
    finally:
        await c.close()
        await runner.cleanup()
    headers, body, peer = seen[0]
    assert body == b'{"a":1}' and headers["Authorization"] == "Bearer k"
    assert headers["Host"] == f"127.0.0.1:{port}" and "User-Agent" not in headers
    assert headers["Accept-Encoding"] == "gzip, deflate"
    assert seen[1][2] == peer  # the keep-alive connection was reused


async def test_chunked_and_gzip_and_deflate_answers_are_decoded():
    text = b"data: hello\n\n" * 2000

    async def handler(request):
        kind = request.path.rsplit("/", 1)[1]
        if kind == "chunked":
            resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await resp.prepare(request)
            for i in range(0, len(text), 1000):
                await resp.write(text[i : i + 1000])
            await resp.write_eof()
            return resp
        data = gzip.compress(text) if kind == "gzip" else zlib.compress(text)
        return web.Response(body=data, headers={"Content-Encoding": kind})

    runner, port = await serve_post(handler)
    c = client()
    try:
        for kind in ("chunked", "gzip", "deflate"):
            resp = await c.post(f"http://127.0.0.1:{port}/{kind}", b"", {}, total=5, connect=5, sock_read=5)
            got = b"".join([chunk async for chunk in resp.content.iter_any()])
            resp.release()
            assert got == text, kind
    finally:
        await c.close()
        await runner.cleanup()


async def test_a_body_delimited_by_the_close_and_a_close_mid_answer():
    async def answer(reader, writer):
        head, _ = await _read_request(reader)
        if b"/eof" in head:
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nall of it")
        else:
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly part")
        await writer.drain()

    server, port, _ = await _raw(answer)
    c = client()
    try:
        resp = await c.post(f"http://127.0.0.1:{port}/eof", b"", {}, total=5, connect=5, sock_read=None)
        assert await resp.read() == b"all of it"
        resp.release()
        resp = await c.post(f"http://127.0.0.1:{port}/cut", b"", {}, total=5, connect=5, sock_read=None)
        with pytest.raises(aiohttp.ClientPayloadError):
            await resp.read()
        resp.close()
    finally:
        await c.close()
        server.close()


async def test_transport_failures_are_the_exceptions_the_proxy_handles():
    async def answer(reader, writer):
        head, _ = await _read_request(reader)
        if b"/silent" in head:
            await asyncio.sleep(3)
        elif b"/garbage" in head:
            writer.write(b"NOT HTTP AT ALL\r\n\r\n")
            await writer.drain()
            await asyncio.sleep(1)
        # /drop: close without a byte

    server, port, _ = await _raw(answer)
    c = client()
    base = f"http://127.0.0.1:{port}"
    try:
        with pytest.raises(aiohttp.ServerDisconnectedError):
            await c.post(base + "/drop", b"", {}, total=5, connect=5, sock_read=None)
        with pytest.raises(TimeoutError):
            await c.post(base + "/silent", b"", {}, total=0.3, connect=5, sock_read=None)
        with pytest.raises(aiohttp.SocketTimeoutError):
            await c.post(base + "/silent", b"", {}, total=None, connect=5, sock_read=0.3)
        with pytest.raises(aiohttp.ClientResponseError):
            await c.post(base + "/garbage", b"", {}, total=5, connect=5, sock_read=None)
        with pytest.raises(h1client.BadRequestHead):
            await c.post(base + "/x", b"", {"X-Evil": "a\r\nInjected: 1"}, total=5, connect=5, sock_read=None)
        server.close()
        await server.wait_closed()
        with pytest.raises(ConnectionRefusedError):
            await c.post(base + "/x", b"", {}, total=5, connect=5, sock_read=None)
    finally:
        await c.close()
    for exc in (aiohttp.ServerDisconnectedError(), TimeoutError(), h1client.BadRequestHead("x")):
        assert isinstance(exc, TRANSPORT_ERRORS)


async def test_an_idle_connection_the_upstream_closed_is_not_reused():
    async def answer(reader, writer):
        await _read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        await writer.drain()
        # then close: the keep-alive connection dies while idle in the pool

    server, port, peers = await _raw(answer)
    c = client()
    try:
        for _ in range(3):
            resp = await c.post(f"http://127.0.0.1:{port}/x", b"", {}, total=5, connect=5, sock_read=None)
            assert await resp.read() == b"ok"
            resp.release()
            await asyncio.sleep(0.05)  # the close reaches the pooled connection
    finally:
        await c.close()
        server.close()
    assert len(set(peers)) == 3


async def test_a_slow_reader_pauses_the_socket_and_gets_every_byte():
    size = 4 * 1024 * 1024

    async def handler(request):
        return web.Response(body=b"x" * size)

    runner, port = await serve_post(handler)
    c = client()
    try:
        resp = await c.post(f"http://127.0.0.1:{port}/big", b"", {}, total=10, connect=5, sock_read=2)
        await asyncio.sleep(0.3)  # the reader is away: the socket is paused, not the buffer grown
        assert resp.paused and resp.buffered <= h1response.HIGH_WATER + 256 * 1024
        got = 0
        async for chunk in resp.content.iter_any():
            got += len(chunk)
            await asyncio.sleep(0.001)
        assert got == size
        resp.release()
    finally:
        await c.close()
        await runner.cleanup()


async def test_a_host_name_is_resolved_through_the_guard():
    async def handler(request):
        return web.Response(text="ok")

    runner, port = await serve_post(handler)
    open_client, guarded = client(), UpstreamClient(impl="h1", ssrf_guard=True)
    try:
        resp = await open_client.post(
            f"http://localhost:{port}/x", b"", {}, total=5, connect=5, sock_read=None
        )
        assert await resp.read() == b"ok"
        resp.release()
        with pytest.raises(OSError, match="loopback"):
            await guarded.post(f"http://localhost:{port}/x", b"", {}, total=5, connect=5, sock_read=None)
    finally:
        await open_client.close()
        await guarded.close()
        await runner.cleanup()


def _self_signed(tmp_path):
    """A certificate for 127.0.0.1 and localhost, and its key, as PEM files."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return cert_file, key_file


async def test_https_verifies_the_certificate(tmp_path, monkeypatch):
    import ssl

    cert_file, key_file = _self_signed(tmp_path)
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(cert_file, key_file)

    async def answer(reader, writer):
        while True:
            try:
                _, body = await _read_request(reader)
            except asyncio.IncompleteReadError:
                return
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
            await writer.drain()

    server = await asyncio.start_server(answer, "127.0.0.1", 0, ssl=server_ctx)
    port = server.sockets[0].getsockname()[1]
    c = client()
    try:
        with pytest.raises(ssl.SSLCertVerificationError):  # not signed by a trusted authority
            await c.post(f"https://localhost:{port}/x", b"no", {}, total=5, connect=5, sock_read=None)
        trusting = ssl.create_default_context(cafile=str(cert_file))
        monkeypatch.setattr(h1client, "_tls_context", lambda: trusting)
        for body in (b"hello", b"again"):
            resp = await c.post(f"https://localhost:{port}/x", body, {}, total=5, connect=5, sock_read=None)
            assert resp.status == 200 and await resp.read() == body
            resp.release()
        assert len(c.pool.idle[("https", "localhost", port)]) == 1  # one TLS connection, reused
    finally:
        await c.close()
        server.close()


async def test_idle_connections_are_closed_after_the_keepalive():
    async def handler(request):
        return web.Response(text="ok")

    runner, port = await serve_post(handler)
    c = client()
    try:
        c.pool.keepalive = 0.2
        resp = await c.post(f"http://127.0.0.1:{port}/x", b"", {}, total=5, connect=5, sock_read=None)
        await resp.read()
        resp.release()
        (conn,) = c.pool.idle[("http", "127.0.0.1", port)]
        await asyncio.sleep(0.5)
        assert conn.closed and not c.pool.idle and c.pool.sweep is None
    finally:
        await c.close()
        await runner.cleanup()


async def test_idle_connections_per_host_are_capped(monkeypatch):
    async def handler(request):
        await asyncio.sleep(0.05)
        return web.Response(text="ok")

    monkeypatch.setattr(h1client, "MAX_IDLE_PER_HOST", 3)
    runner, port = await serve_post(handler)
    c = client()
    try:

        async def one():
            resp = await c.post(f"http://127.0.0.1:{port}/x", b"", {}, total=5, connect=5, sock_read=None)
            await resp.read()
            resp.release()

        await asyncio.gather(*(one() for _ in range(8)))  # eight at once: eight connections
        assert len(c.pool.idle[("http", "127.0.0.1", port)]) == 3
        await one()  # and one of the kept ones is reused
        assert len(c.pool.idle[("http", "127.0.0.1", port)]) == 3
    finally:
        await c.close()
        await runner.cleanup()


async def test_an_answer_before_the_whole_body_went_out_closes_the_connection():
    async def answer(reader, writer):
        await reader.readuntil(b"\r\n\r\n")  # the head only: the 8 MB body is never read
        writer.write(b"HTTP/1.1 413 Payload Too Large\r\nContent-Length: 3\r\n\r\nbig")
        await writer.drain()
        await asyncio.sleep(1)

    server, port, _ = await _raw(answer)
    c = client()
    try:
        resp = await c.post(
            f"http://127.0.0.1:{port}/x", b"x" * (8 << 20), {}, total=5, connect=5, sock_read=None
        )
        assert resp.status == 413 and await resp.read() == b"big"
        resp.release()
        assert not c.pool.idle  # the rest of the body would have been the next request
    finally:
        await c.close()
        server.close()
