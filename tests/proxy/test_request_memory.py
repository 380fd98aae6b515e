"""Issue 13: a request body is held once while it is read (not once per chunk list plus once
joined), and large bodies are served a bounded number at a time per worker."""

from __future__ import annotations

import asyncio
import tracemalloc

import orjson
import pytest
from aiohttp import web

from gateway.proxy.exchange import read_body
from gateway.wiring import build_proxy_app

from .helpers import SECRET, channel, chat_completion, provider, snapshot

pytestmark = pytest.mark.asyncio


async def test_a_chunked_body_is_held_once_at_the_peak():
    size, piece = 16 * 1024 * 1024, 64 * 1024
    count = size // piece
    sent = 0

    async def receive():  # each chunk freshly allocated, as a server's reads are
        nonlocal sent
        sent += 1
        return {"type": "http.request", "body": bytes([65 + sent % 26]) * piece, "more_body": sent < count}

    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        body = await read_body(receive, 64 * 1024 * 1024, {"content-length": str(size)})
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    assert (
        len(body) == size
        and body[:piece] == b"B" * piece
        and body[-piece:] == bytes([65 + count % 26]) * piece
    )
    assert peak < 1.3 * size, peak  # the old reader held every chunk and their join: 2x


async def _send(app, body: bytes, port: int, results: list[int]) -> None:
    hdrs = [(b"authorization", f"Bearer {SECRET}".encode()), (b"content-length", str(len(body)).encode())]
    scope = {
        "type": "http",
        "method": "POST",
        "path": "/v1/chat/completions",
        "query_string": b"",
        "headers": hdrs,
        "http_version": "1.1",
        "scheme": "http",
        "server": ("127.0.0.1", 80),
        "client": ("127.0.0.1", 5),
    }
    sent = False

    async def receive():
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.sleep(3600)

    async def send(message):
        if message["type"] == "http.response.start":
            results.append(message["status"])

    await app(scope, receive, send)


async def test_large_bodies_are_served_a_bounded_number_at_a_time():
    state = {"now": 0, "max": 0}

    async def handler(request):
        await request.read()
        state["now"] += 1
        state["max"] = max(state["max"], state["now"])
        await asyncio.sleep(0.2)
        state["now"] -= 1
        return web.json_response(chat_completion("ok"))

    upstream = web.Application()
    upstream.router.add_post("/v1/chat/completions", handler)
    runner = web.AppRunner(upstream)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    app = build_proxy_app()
    app.large_body_bytes = 10_000
    app.large_bodies = asyncio.Semaphore(2)
    try:
        app.holder.set(
            snapshot([provider(1, [channel(1, base_url=f"http://127.0.0.1:{port}/v1", models={"m": "m"})])])
        )
        big = orjson.dumps({"model": "m", "messages": [{"role": "user", "content": "x" * 50_000}]})
        small = orjson.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]})
        results: list[int] = []
        await asyncio.gather(*(_send(app, big, port, results) for _ in range(6)))
        assert results == [200] * 6 and state["max"] == 2
        state["max"] = 0
        await asyncio.gather(*(_send(app, small, port, results) for _ in range(6)))
        assert state["max"] > 2  # small bodies are not gated
    finally:
        await app.client.close()
        await runner.cleanup()
