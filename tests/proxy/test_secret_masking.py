"""Issue 13: an upstream that echoes the channel's secrets (its key, its URL with a token, its
host) in a stream error must not hand them to the client, the log or a capture, in every client
protocol, mid-stream and before the first frame."""

from __future__ import annotations

import logging

import orjson
import pytest
from aiohttp import web

from captures.dump import build
from captures.record import AttemptRecord, CaptureRecord
from gateway.proxy.secrets import channel_secrets

from .helpers import call, channel, chat_chunks, provider, snapshot

KEY = "plainkey42"  # not key-shaped: only verbatim masking can catch it
TOKEN = "tok9f8e7d6c5b4a"


class EchoingUpstream:
    """``/mid/...`` streams one content chunk, then an error frame naming every secret;
    ``/first/...`` starts with that error frame."""

    def __init__(self) -> None:
        self.runner: web.AppRunner | None = None
        self.port = 0

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/{mode}/{token}/v1/chat/completions", self.handle)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]

    def base(self, mode: str) -> str:
        return f"http://127.0.0.1:{self.port}/{mode}/{TOKEN}/v1"

    async def handle(self, request: web.Request) -> web.StreamResponse:
        mode = request.match_info["mode"]
        resp = web.StreamResponse(headers={"content-type": "text/event-stream"})
        await resp.prepare(request)
        chunks = chat_chunks(["hello"])
        leak = (
            f"invalid credentials {request.headers['authorization']} for {request.url} "
            f"(host 127.0.0.1:{self.port}, token {TOKEN})"
        )
        error = (
            b"data: "
            + orjson.dumps({"error": {"message": leak, "type": "server_error", "code": "boom"}})
            + b"\n\n"
        )
        if mode == "mid":
            await resp.write(chunks[0] + chunks[1] + error)
        else:
            await resp.write(error)
        await resp.write_eof()
        return resp


@pytest.fixture
async def upstream():
    up = EchoingUpstream()
    await up.start()
    yield up
    await up.runner.cleanup()


BODIES = {
    "/v1/chat/completions": {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]},
    "/v1/responses": {"model": "m", "stream": True, "input": "hi"},
    "/v1/messages": {
        "model": "m",
        "stream": True,
        "max_tokens": 20,
        "messages": [{"role": "user", "content": "hi"}],
    },
}


def _leaks(text: str, port: int) -> list[str]:
    return [s for s in (KEY, TOKEN, f"127.0.0.1:{port}", "127.0.0.1") if s in text]


@pytest.mark.asyncio
@pytest.mark.parametrize("path", list(BODIES))
@pytest.mark.parametrize("mode", ["mid", "first"])
async def test_stream_error_never_shows_channel_secrets(app, upstream, path, mode, caplog):
    app.holder.set(
        snapshot([provider(1, [channel(1, base_url=upstream.base(mode), models={"m": "m"}, api_key=KEY)])])
    )
    with caplog.at_level(logging.INFO):
        reply = await call(app, "POST", path, BODIES[path])
    text = reply.body.decode()
    if mode == "mid":
        assert reply.status == 200 and "hello" in text
        assert "error" in text  # the error still reaches the client, as its protocol's event
    else:
        assert reply.status == 502, text
    assert _leaks(text, upstream.port) == [], text
    logged = "\n".join(r.getMessage() for r in caplog.records if r.name.startswith("gateway"))
    assert _leaks(logged, upstream.port) == [], logged


def test_channel_secrets_cover_url_parts():
    found = channel_secrets(
        "k" * 12, "https://user:pw1234@internal.corp:8443/abc/deployments12345?key=zzzz9999", ()
    )
    for part in ("k" * 12, "internal.corp", "internal.corp:8443", "pw1234", "zzzz9999", "deployments12345"):
        assert part in found
    assert found == tuple(sorted(found, key=len, reverse=True))


def test_capture_dump_masks_channel_secrets_in_raw_upstream_bodies():
    record = CaptureRecord(
        request_id="r",
        created_at=0.0,
        api_key_id=1,
        api_key_name="k",
        client_protocol="chat",
        stream=True,
        logical_model="m",
    )
    attempt = AttemptRecord(
        provider="p",
        channel="c",
        upstream_protocol="chat_completion",
        logical_model="m",
        upstream_model="m",
        started_at=0.0,
    )
    attempt.upstream_response = f'{{"error": "bad key {KEY} at http://10.1.2.3/{TOKEN}"}}'
    attempt.upstream_frames.append(f'data: {{"error": {{"message": "key {KEY}"}}}}')
    record.attempts.append(attempt)
    record.secrets.update(channel_secrets(KEY, f"http://10.1.2.3/{TOKEN}", ()))
    data, _meta = build(record)
    assert KEY.encode() not in data and TOKEN.encode() not in data and b"10.1.2.3" not in data
    assert b"***" in data
