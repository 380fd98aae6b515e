"""Sticky routing through the ASGI app: a conversation keeps its channel (whole and streamed
turns), the attempt tells recorders (captures) whether affinity chose the channel, an open circuit
on the bound channel is skipped without losing the binding, and ``off`` never binds."""

from __future__ import annotations

import dataclasses

import pytest

from gateway.crypto import hash_api_key
from gateway.live_config import DatabaseConfigSource
from gateway.proxy.affinity import AffinityStore
from gateway.proxy.app import ProxyApp
from gateway.proxy.recorder import Recorder, RecorderSet
from gateway.wiring import authenticate, proxy_config

from .helpers import SECRET, call, channel, key, provider, snapshot

pytestmark = pytest.mark.asyncio
CHAT = "/v1/chat/completions"


class Attempts(Recorder):
    __slots__ = ("seen",)

    def __init__(self, sink: list) -> None:
        self.seen = sink

    def on_attempt_start(self, att) -> None:
        self.seen.append((att.channel.id, att.affinity))


def make_app(upstream, seen: list, mode: str = "sticky"):
    app = ProxyApp(
        proxy_config(),
        DatabaseConfigSource(),
        authenticate,
        RecorderSet([lambda ex, snap, k, raw: Attempts(seen)]),
    )
    p = provider(
        1,
        [
            channel(1, base_url=f"{upstream.base}/ok", models={"m": "up-a"}),
            channel(2, base_url=f"{upstream.base}/ok", models={"m": "up-b"}),
        ],
    )
    app.holder.set(snapshot([dataclasses.replace(p, affinity_mode=mode)], keys={hash_api_key(SECRET): key()}))
    app.runtime.affinity = AffinityStore(None)
    return app


def turn(history: list, n: int, stream: bool) -> dict:
    history.append({"role": "user", "content": f"turn {n}"})
    body = {"model": "m", "messages": list(history)}
    if stream:
        body["stream"] = True
    return body


async def test_conversation_keeps_its_channel_and_attempts_say_so(upstream):
    seen: list = []
    app = make_app(upstream, seen)
    history = [{"role": "system", "content": "S"}, {"role": "user", "content": "open"}]
    try:
        for n in range(12):
            reply = await call(app, "POST", CHAT, turn(history, n, stream=n % 2 == 1))
            assert reply.status == 200
    finally:
        await app.client.close()
    models = {b["model"] for b in upstream.bodies}
    assert len(models) == 1, "every turn on the first turn's channel"
    assert seen[0][1]["hit"] is False and all(a["hit"] for _, a in seen[1:])
    assert len({a["key"] for _, a in seen}) == 1 and len(seen[0][1]["key"]) == 12


async def test_open_circuit_skips_the_bound_channel_and_keeps_the_binding(upstream):
    seen: list = []
    app = make_app(upstream, seen)
    history = [{"role": "user", "content": "open"}]
    try:
        assert (await call(app, "POST", CHAT, turn(history, 0, False))).status == 200
        bound = seen[0][0]
        for _ in range(3):
            app.breaker.record_failure(bound)
        assert (await call(app, "POST", CHAT, turn(history, 1, False))).status == 200
        assert seen[1][0] != bound and seen[1][1]["hit"] is False
        app.breaker.record_success(bound)
        assert (await call(app, "POST", CHAT, turn(history, 2, False))).status == 200
        assert seen[2][0] == bound and seen[2][1]["hit"] is True, "back once the circuit closed"
    finally:
        await app.client.close()


async def test_off_never_looks_up_or_binds(upstream):
    seen: list = []
    app = make_app(upstream, seen, mode="off")
    try:
        assert (await call(app, "POST", CHAT, turn([], 0, False))).status == 200
    finally:
        await app.client.close()
    assert seen[0][1] is None and app.runtime.affinity.local == {}
