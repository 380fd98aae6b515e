"""Issue 13: an upstream stream honours a first-byte timeout, an idle timeout that keep-alive
drips do not reset, and a total cap. Each case would hang (the upstream never stops) without
the limit; the test bounds the wait and checks the error the client gets."""

from __future__ import annotations

import asyncio

import orjson
import pytest
from aiohttp import web

from .helpers import call, channel, chat_chunks, provider, snapshot

pytestmark = pytest.mark.asyncio

BODY = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]}


async def _drip(request: web.Request) -> web.StreamResponse:
    """``comments``: only keep-alive comments, forever; ``first-then-comments``: one content
    chunk, then comments; ``content``: a content chunk every 0.1 s, forever."""
    mode = request.match_info["mode"]
    resp = web.StreamResponse(headers={"content-type": "text/event-stream"})
    await resp.prepare(request)
    chunks = chat_chunks(["x"])
    try:
        if mode != "comments":
            await resp.write(chunks[0] + chunks[1])
        for _ in range(600):
            await asyncio.sleep(0.1)
            await resp.write(chunks[1] if mode == "content" else b": still here\n\n")
    except (ConnectionError, RuntimeError):
        pass
    return resp


@pytest.fixture
async def upstream():
    app = web.Application()
    app.router.add_post("/{mode}/v1/chat/completions", _drip)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    yield f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}"
    await runner.cleanup()


def _use(app, base: str, mode: str) -> None:
    app.holder.set(
        snapshot([provider(1, [channel(1, base_url=f"{base}/{mode}/v1", models={"m": "m"})], breaker=False)])
    )


async def test_first_byte_timeout_fails_the_attempt_before_anything_is_sent(app, upstream):
    _use(app, upstream, "comments")
    app.runtime.stream_first_byte_timeout = 0.5
    reply = await asyncio.wait_for(call(app, "POST", "/v1/chat/completions", BODY), 10)
    assert reply.status == 502, reply.body
    assert "no content within" in reply.json()["error"]["message"]


async def test_keepalive_drips_do_not_hold_a_stream_past_its_idle_timeout(app, upstream):
    _use(app, upstream, "first-then-comments")
    app.runtime.stream_idle_timeout = 0.5
    reply = await asyncio.wait_for(call(app, "POST", "/v1/chat/completions", BODY), 10)
    assert reply.status == 200
    last = [line for line in reply.body.split(b"\n") if line.startswith(b"data: {")][-1]
    assert orjson.loads(last[6:])["error"]["code"] == "upstream_idle_timeout"


async def test_a_stream_that_never_ends_is_cut_at_the_total_cap(app, upstream):
    _use(app, upstream, "content")
    app.runtime.stream_max_seconds = 1.0
    reply = await asyncio.wait_for(call(app, "POST", "/v1/chat/completions", BODY), 10)
    assert reply.status == 200
    last = [line for line in reply.body.split(b"\n") if line.startswith(b"data: {")][-1]
    assert orjson.loads(last[6:])["error"]["code"] == "upstream_stream_timeout"
