"""Issue 13: a non-stream client that disconnects cancels its upstream call and the request is
recorded as ``client_gone``; a quick request never starts a watcher."""

from __future__ import annotations

import asyncio
import time

import orjson
import pytest
from aiohttp import web

from gateway.proxy.recorder import Recorder, RecorderSet
from gateway.wiring import build_proxy_app

from .helpers import SECRET, channel, chat_completion, provider, snapshot

pytestmark = pytest.mark.asyncio


class Finished(Recorder):
    def __init__(self, out: list) -> None:
        self.out = out

    def on_finish(self, ex, error):
        self.out.append((ex.status, error))


async def test_disconnect_cancels_a_slow_non_stream_call():
    state = {"closed": asyncio.Event()}

    async def slow(request):
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            state["closed"].set()
            raise
        return web.json_response(chat_completion("late"))

    upstream = web.Application()
    upstream.router.add_post("/v1/chat/completions", slow)
    runner = web.AppRunner(upstream, handler_cancellation=True)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    app = build_proxy_app()
    app.watch_delay = 0.1
    finished: list = []
    app.runtime.recorders = RecorderSet([lambda ex, snap, key, raw: Finished(finished)])
    app.holder.set(
        snapshot([provider(1, [channel(1, base_url=f"http://127.0.0.1:{port}/v1", models={"m": "m"})])])
    )
    body = orjson.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]})
    sent = []

    async def receive():
        if not sent:
            sent.append(1)
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.sleep(0.3)
        return {"type": "http.disconnect"}

    async def send(message):
        sent.append(message)

    scope = {
        "type": "http",
        "method": "POST",
        "path": "/v1/chat/completions",
        "query_string": b"",
        "headers": [
            (b"authorization", f"Bearer {SECRET}".encode()),
            (b"content-length", str(len(body)).encode()),
        ],
        "http_version": "1.1",
        "scheme": "http",
        "server": ("127.0.0.1", 80),
        "client": ("127.0.0.1", 5),
    }
    t = time.monotonic()
    try:
        await asyncio.wait_for(app(scope, receive, send), 4)
        assert time.monotonic() - t < 3  # not the upstream's 5 s
        assert finished and finished[0][1].startswith("client_gone") and finished[0][0] == 499
        await asyncio.wait_for(state["closed"].wait(), 3)  # the upstream saw its request dropped
    finally:
        await app.client.close()
        await runner.cleanup()
