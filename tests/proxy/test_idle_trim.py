"""Issue 20: a worker gives memory back once it goes idle after a burst (a full collection and
glibc's malloc_trim), once per burst, never while a request is in progress."""

from __future__ import annotations

import asyncio

import orjson
import pytest
from aiohttp import web

from gateway.proxy import idle_trim
from gateway.wiring import build_proxy_app

from .helpers import channel, chat_completion, provider, snapshot
from .test_request_memory import _send


async def _healthz(app) -> None:
    scope = {"type": "http", "method": "GET", "path": "/healthz", "query_string": b"", "headers": []}
    scope |= {"http_version": "1.1", "scheme": "http", "server": ("127.0.0.1", 80), "client": None}
    statuses: list[int] = []

    async def send(message):
        if message["type"] == "http.response.start":
            statuses.append(message["status"])

    await app(scope, None, send)
    assert statuses == [200]


@pytest.mark.asyncio
async def test_the_trim_runs_once_after_a_burst_and_never_while_a_request_is_open(monkeypatch):
    trims: list[int] = []
    monkeypatch.setattr(idle_trim, "_malloc_trim", lambda: trims.append(1) or 1)

    async def handler(request):
        await request.read()
        return web.json_response(chat_completion("ok"))

    upstream = web.Application()
    upstream.router.add_post("/v1/chat/completions", handler)
    runner = web.AppRunner(upstream)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    app = build_proxy_app()
    trim = app.idle_trim
    try:
        app.holder.set(
            snapshot([provider(1, [channel(1, base_url=f"http://127.0.0.1:{port}/v1", models={"m": "m"})])])
        )
        body = orjson.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]})
        results: list[int] = []
        assert not trim.check()  # nothing served yet: nothing to give back
        await asyncio.gather(*(_send(app, body, port, results) for _ in range(3)))
        assert results == [200] * 3 and trim.active == 0
        assert not trim.check()  # requests arrived during this interval: not idle yet
        await _healthz(app)  # a load balancer's probe is no activity
        assert trim.check() and trims == [1]  # a whole quiet interval after the burst
        assert not trim.check() and trims == [1]  # once per burst
        await _send(app, body, port, results)
        trim.check()
        trim.active += 1  # a stream still open: never trimmed under it
        assert not trim.check() and trims == [1]
        trim.active -= 1
        assert trim.check() and trims == [1, 1]
    finally:
        await app.client.close()
        await runner.cleanup()


def test_malloc_trim_is_found_in_this_c_library():
    trim = idle_trim._load_malloc_trim()
    assert trim is not None and trim() in (0, 1)
