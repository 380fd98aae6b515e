"""The request-log recorder in the pipeline (in-process ASGI, a small aiohttp upstream): the row
a request hands off, the estimate for a stream whose upstream reports no usage, and the switch."""

from __future__ import annotations

import gc
from decimal import Decimal as D
from math import ceil

import orjson
import pytest
from aiohttp import web

from gateway.crypto import hash_api_key
from gateway.live_config import DatabaseConfigSource
from gateway.proxy.app import ProxyApp
from gateway.proxy.pricing import Tokens, cost_nano
from gateway.proxy.recorder import RecorderSet
from gateway.proxy.snapshot import ChannelSnap, ModelPrice
from gateway.wiring import authenticate, proxy_config, recorder_factories
from requestlogs import recorder as rl_recorder
from requestlogs.rowfields import ROW_FIELDS
from tests.proxy.helpers import SECRET, call, chat_chunks, key, provider, snapshot

PRICE = ModelPrice(input=D("1.20"), output=D("4.80"), multiplier=D("1"))


@pytest.fixture
async def upstream():
    async def handle(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        resp = web.StreamResponse(headers={"content-type": "text/event-stream"})
        await resp.prepare(request)
        chunks = chat_chunks(["echo: ", body["messages"][-1]["content"]])
        for chunk in chunks:
            if b'"usage"' not in chunk:  # this upstream never reports usage
                await resp.write(chunk)
        await resp.write_eof()
        return resp

    app = web.Application()
    app.router.add_post("/v1/chat/completions", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    yield f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}"
    await runner.cleanup()


@pytest.fixture
def handed(monkeypatch):
    """The finished requests' recorders, as the writer thread receives them."""
    out: list = []
    monkeypatch.setattr(rl_recorder.sink, "submit", out.append)
    return out


def chat_app(upstream: str) -> ProxyApp:
    ch = ChannelSnap(
        id=1,
        name="c1",
        provider_id=1,
        protocol="chat_completion",
        base_url=upstream,
        api_key="k",
        weight=1,
        extra_headers=(),
        models={"m": "up-m"},
        prices={"m": PRICE},
    )
    app = ProxyApp(
        proxy_config(), DatabaseConfigSource(), authenticate, RecorderSet([rl_recorder.make_factory(True)])
    )
    app.holder.set(snapshot([provider(1, [ch])], keys={hash_api_key(SECRET): key()}))
    return app


@pytest.mark.asyncio
async def test_stream_without_usage_is_priced_from_an_estimate(upstream, handed):
    app = chat_app(upstream)
    body = orjson.dumps(
        {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hello there"}]}
    )
    try:
        reply = await call(app, "POST", "/v1/chat/completions", body)
    finally:
        await app.client.close()
    assert reply.status == 200
    row = rl_recorder.sink.writer.prepare(handed[0])
    row = dict(zip(ROW_FIELDS, row, strict=True))
    assert row["status"] == "success" and row["stream"] and row["provider"] == "p1" and row["channel"] == "c1"
    assert row["upstream_model"] == "up-m" and row["logical_model"] == "m"
    assert row["input_tokens"] == ceil(len(body) / 4)
    assert row["output_tokens"] == ceil(len("echo: hello there") / 4)
    assert row["cost_estimated"] is True
    assert row["cost_nano"] == cost_nano(
        Tokens(input=row["input_tokens"], output=row["output_tokens"]), PRICE
    )
    assert row["request_id"] == row["x_request_id"] and row["client_request_id"] == ""
    assert handed[0].row() == row


@pytest.mark.asyncio
async def test_a_finished_request_keeps_neither_its_exchange_nor_its_attempt(upstream, handed):
    """The row waits in the writer's queue for up to a batch's linger: what the recorder hands
    over must not hold the request's exchange or its attempt (the decoded request, the upstream
    body: a 1 MB request would stay in memory until its row is written)."""
    app = chat_app(upstream)
    body = orjson.dumps({"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]})
    try:
        reply = await call(app, "POST", "/v1/chat/completions", body)
    finally:
        await app.client.close()
    assert reply.status == 200
    (rec,) = handed
    held = gc.get_referents(rec)
    for container in [o for o in held if isinstance(o, tuple | list)]:  # the sealed parts, the tries
        held += gc.get_referents(container)
    assert {type(o).__name__ for o in held}.isdisjoint({"Exchange", "Attempt", "Request", "bytes"})
    row = rec.row()
    assert row["status"] == "success" and row["upstream_model"] == "up-m" and row["channel"] == "c1"


def test_the_switch(settings):
    assert rl_recorder.make_factory(False) is None
    names = [getattr(f, "__name__", "") for f in recorder_factories()]
    assert names == ["request_log_recorder", "capture_recorder"]  # on by default, observing too
    settings.GATEWAY = {**settings.GATEWAY, "REQUEST_LOGS": False}
    names = [getattr(f, "__name__", "") for f in recorder_factories()]
    assert names == ["observe_recorder", "capture_recorder"]
