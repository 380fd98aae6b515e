"""Large client bodies are parsed on the image pool, off the event loop (issue 16:
``gateway.proxy.offload``). What the upstream and the client get must not depend on where the
body was parsed."""

from __future__ import annotations

import base64
import io
import json
import threading

import pytest
from PIL import Image

from gateway.images import pool as image_pool
from gateway.proxy import offload
from gateway.proxy.chain import CompiledRule
from transforms.registry import registry

from .helpers import call, channel, provider, snapshot

pytestmark = pytest.mark.asyncio

CHAT = "/v1/chat/completions"
SMALL_THRESHOLD = 1024  # the tests' bodies are a few KB: above it they take the large-body path


def install(app, upstream, chain: tuple = ()) -> None:
    ch = channel(1, base_url=f"{upstream.base}/ok/v1", models={"m": "up-m"})
    app.holder.set(snapshot([provider(1, [ch], chain=chain)]))


def image_body() -> bytes:
    out = io.BytesIO()
    Image.effect_noise((300, 200), 60).convert("RGB").save(out, "PNG")
    url = "data:image/png;base64," + base64.b64encode(out.getvalue()).decode()
    content = [{"type": "text", "text": "what is this?"}, {"type": "image_url", "image_url": {"url": url}}]
    return json.dumps({"model": "m", "messages": [{"role": "user", "content": content}]}).encode()


async def test_large_image_body_reaches_the_upstream_byte_identical_to_the_small_path(app, upstream):
    """The real pool (processes): the body is pickled there and back, the image compressed."""
    rule = registry()["image_compress_input"]({"max_edge_px": 64, "output_format": "webp"})
    install(app, upstream, chain=(CompiledRule(1, "provider", "request", None, rule),))
    body = image_body()
    assert len(body) > SMALL_THRESHOLD
    image_pool.use("process")
    try:
        for threshold in (0, SMALL_THRESHOLD):
            app.runtime.offload_json_bytes = threshold
            reply = await call(app, "POST", CHAT, body)
            assert reply.status == 200, reply.body
            assert reply.json()["choices"][0]["message"]["content"] == "echo: what is this?"
    finally:
        image_pool.use(None)
    inline, offloaded = upstream.raw_bodies
    assert offloaded == inline
    assert b'"url":"data:image/webp;base64,' in offloaded  # and the rule did compress it


async def test_only_bodies_above_the_threshold_are_parsed_on_the_pool(app, upstream, monkeypatch):
    install(app, upstream)
    seen: list[str] = []
    real = offload.loads_checked

    def spy(raw):
        seen.append(threading.current_thread().name)
        return real(raw)

    monkeypatch.setattr(offload, "loads_checked", spy)
    app.runtime.offload_json_bytes = SMALL_THRESHOLD
    image_pool.use("thread")  # the spy is not picklable: the pool's threads for this test
    try:
        small = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode()
        assert (await call(app, "POST", CHAT, small)).status == 200
        assert seen == []
        assert (await call(app, "POST", CHAT, image_body())).status == 200
    finally:
        image_pool.use(None)
    assert len(seen) == 1 and seen[0].startswith("gateway-image")


async def test_a_large_body_without_base64_data_is_parsed_on_the_loop(app, upstream, monkeypatch):
    """A coding agent's 1 MB history is many small values: it parses faster on the loop than it
    travels to the pool and back (the 1 MB agent requests were five times slower offloaded)."""
    install(app, upstream)
    offloaded: list[int] = []

    async def spy(raw):
        offloaded.append(len(raw))
        return offload.loads_checked(raw)

    monkeypatch.setattr(offload, "parse", spy)
    app.runtime.offload_json_bytes = SMALL_THRESHOLD
    turns = [{"role": "user", "content": f"turn {i}: " + "words " * 20} for i in range(50)]
    history = json.dumps({"model": "m", "messages": turns}).encode()
    assert len(history) > SMALL_THRESHOLD
    assert (await call(app, "POST", CHAT, history)).status == 200
    assert offloaded == []
    assert (await call(app, "POST", CHAT, image_body())).status == 200
    assert len(offloaded) == 1


def _deep_body() -> bytes:
    deep: object = "x"
    for _ in range(300):
        deep = [deep]
    return json.dumps({"model": "m", "messages": [], "metadata": {"k": deep, "pad": "base64" * 400}}).encode()


@pytest.mark.parametrize(
    "raw",
    [b'{"model": "m", "messages": ["base64' + b" " * 2000, b'["base64"' + b" " * 2000 + b",1]", _deep_body()],
    ids=["not-json", "not-an-object", "too-deep"],
)
async def test_large_bad_bodies_get_the_same_400_as_small_ones(app, upstream, raw):
    install(app, upstream)
    replies = []
    image_pool.use("thread")
    try:
        for threshold in (0, SMALL_THRESHOLD):
            app.runtime.offload_json_bytes = threshold
            replies.append(await call(app, "POST", CHAT, raw))
    finally:
        image_pool.use(None)
    assert replies[0].status == replies[1].status == 400
    assert replies[0].json() == replies[1].json()
    assert upstream.bodies == []


async def test_a_broken_pool_parses_the_body_on_the_loop_instead(app, upstream, monkeypatch):
    install(app, upstream)

    async def broken(fn, *args):
        raise image_pool.PoolBroken("image worker failed: BrokenProcessPool")

    monkeypatch.setattr(image_pool, "run", broken)
    app.runtime.offload_json_bytes = SMALL_THRESHOLD
    reply = await call(app, "POST", CHAT, image_body())
    assert reply.status == 200, reply.body
    assert upstream.bodies[0]["messages"][0]["content"][0]["text"] == "what is this?"
