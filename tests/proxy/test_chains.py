"""Chain order (provider -> global -> API key, in both phases), glob matching against the
logical model (after the key's redirect, never the upstream model), operator errors, and the
whole-response / forced-stream paths."""

from __future__ import annotations

import orjson
import pytest

from gateway.crypto import hash_api_key
from gateway.errors import TransformRejected
from gateway.live_config import BrokenTransform
from gateway.urp import TextNode
from gateway.urp import events as ev
from gateway.wiring import build_proxy_app
from transforms.base import Transform
from transforms.engine import CompiledRule
from transforms.registry import registry

from .helpers import SECRET, call, channel, key, provider, snapshot, sse_events

pytestmark = pytest.mark.asyncio
CHAT = "/v1/chat/completions"


class Marker(Transform):
    """Test-only: appends ``|<tag>`` to the last user text (request) and to the first output text
    (response, whole or streamed)."""

    type_id = "test_marker"
    category = "field"
    name = description = {"en": "marker", "zh": "marker"}
    phases = ("request", "response")
    config_schema = {
        "type": "object",
        "properties": {"tag": {"type": "string"}, "whole": {"type": "boolean"}},
    }

    def apply_request(self, req, ctx):
        for node in reversed(req.input):
            if isinstance(node, TextNode) and node.role == "user":
                node.content += "|" + self.config["tag"]
                return

    def apply_response(self, resp, ctx):
        for node in resp.output:
            if isinstance(node, TextNode):
                node.content += "|" + self.config["tag"]
                return

    def needs_whole_response(self, ctx):
        return bool(self.config.get("whole"))

    def apply_event(self, event, state, ctx):
        if isinstance(event, ev.NodeDone) and isinstance(event.node, TextNode):
            tail = "|" + self.config["tag"]
            event.node.content += tail
            return [ev.NodeDelta(index=event.index, kind=ev.TEXT, delta=tail), event]
        return [event]


class Rejecting(Transform):
    type_id = "test_rejecting"
    category = "field"
    name = description = {"en": "reject", "zh": "reject"}
    phases = ("request",)

    def apply_request(self, req, ctx):
        raise TransformRejected("custom tool clashes", param="tools[0]")


@pytest.fixture
def test_transforms():
    reg = registry.copy()
    reg.register(Marker)
    reg.register(Rejecting)
    with registry.swapped(reg):
        yield


def rule(scope, tag, phase="request", models=None, **cfg):
    return CompiledRule(
        rule_id=None, scope=scope, phase=phase, models=models, transform=Marker({"tag": tag, **cfg})
    )


@pytest.fixture
async def app(test_transforms):
    proxy = build_proxy_app()
    yield proxy
    await proxy.client.close()


def body(model="alias", text="q", **kw):
    return {"model": model, "messages": [{"role": "user", "content": text}], **kw}


def install(
    app, upstream, *, pchain=(), gchain=(), kchain=(), redirects=(("alias", "logical-x"),), mode="ok"
):
    k = key(redirects=redirects, chain=tuple(kchain))
    app.holder.set(
        snapshot(
            [
                provider(
                    1,
                    [channel(1, base_url=f"{upstream.base}/{mode}", models={"logical-x": "upstream-x"})],
                    chain=tuple(pchain),
                )
            ],
            keys={hash_api_key(SECRET): k},
            global_chain=tuple(gchain),
        )
    )


async def test_request_and_response_chain_order(app, upstream):
    # Declared out of order on purpose: scope order wins over declaration order.
    install(
        app,
        upstream,
        kchain=[rule("api_key", "K1"), rule("api_key", "K2"), rule("api_key", "k-resp", "response")],
        gchain=[rule("global", "G"), rule("global", "g-resp", "response")],
        pchain=[rule("provider", "P"), rule("provider", "p-resp", "response")],
    )
    reply = await call(app, "POST", CHAT, body(text="q"))
    assert reply.status == 200, reply.body
    assert upstream.bodies[0]["messages"][-1]["content"] == "q|P|G|K1|K2"
    assert reply.json()["choices"][0]["message"]["content"] == "echo: q|P|G|K1|K2|p-resp|g-resp|k-resp"
    assert reply.json()["model"] == "logical-x"  # the logical model the key redirect defined


async def test_stream_chain_order(app, upstream):
    install(
        app,
        upstream,
        pchain=[rule("provider", "p", "response")],
        gchain=[rule("global", "g", "response")],
        kchain=[rule("api_key", "k", "response")],
    )
    reply = await call(app, "POST", CHAT, body(stream=True))
    text = "".join(
        orjson.loads(e)["choices"][0]["delta"].get("content") or ""
        for e in sse_events(reply.body)
        if e != "[DONE]" and orjson.loads(e)["choices"]
    )
    assert text == "echo: q|p|g|k"


async def test_globs_match_logical_model_not_upstream_or_client_alias(app, upstream):
    install(
        app,
        upstream,
        gchain=[
            rule("global", "LOGICAL", models=("logical-*",)),
            rule("global", "UPSTREAM", models=("upstream-*",)),
            rule("global", "ALIAS", models=("alias",)),
            rule("global", "ANY", models=None),
        ],
    )
    reply = await call(app, "POST", CHAT, body(text="q"))
    assert reply.status == 200
    assert upstream.bodies[0]["messages"][-1]["content"] == "q|LOGICAL|ANY"
    assert upstream.bodies[0]["model"] == "upstream-x"


async def test_whole_response_rule_synthesises_the_stream(app, upstream):
    install(app, upstream, gchain=[rule("global", "W", "response", whole=True)])
    reply = await call(app, "POST", CHAT, body(stream=True))
    assert reply.status == 200 and reply.headers["content-type"].startswith("text/event-stream")
    assert upstream.bodies[0].get("stream") in (None, False)  # the upstream was called without streaming
    events = sse_events(reply.body)
    text = "".join(
        orjson.loads(e)["choices"][0]["delta"].get("content") or ""
        for e in events
        if e != "[DONE]" and orjson.loads(e)["choices"]
    )
    assert text == "echo: q|W"
    assert events[-1] == "[DONE]"


async def test_forced_stream_is_collected_for_a_whole_client(app, upstream):
    from transforms.builtin.stream_force import StreamForce

    force = CompiledRule(
        rule_id=None, scope="global", phase="request", models=None, transform=StreamForce({"enabled": True})
    )
    install(app, upstream, gchain=[force])
    reply = await call(app, "POST", CHAT, body(text="z"))
    assert reply.status == 200, reply.body
    assert upstream.bodies[0]["stream"] is True
    assert reply.json()["choices"][0]["message"]["content"] == "echo: z"


async def test_unknown_transform_is_500_transform_init_failed(app, upstream):
    broken = CompiledRule(
        rule_id=9,
        scope="global",
        phase="request",
        models=None,
        transform=BrokenTransform("no_such_transform", "unknown transform"),
    )
    install(app, upstream, gchain=[broken])
    reply = await call(app, "POST", CHAT, body())
    assert reply.status == 500
    err = reply.json()["error"]
    assert err["code"] == "transform_init_failed" and "no_such_transform" in err["message"]
    assert upstream.hits == {}


async def test_rule_rejection_is_400_naming_the_field(app, upstream):
    rej = CompiledRule(rule_id=None, scope="global", phase="request", models=None, transform=Rejecting())
    install(app, upstream, gchain=[rej])
    reply = await call(app, "POST", CHAT, body(stream=True))
    assert reply.status == 400
    assert reply.json()["error"]["param"] == "tools[0]"
    assert upstream.hits == {}


async def test_capture_records_attempts_and_chain(app, upstream, monkeypatch):
    from captures import recorder as capture_mod
    from captures.materialize import materialize
    from gateway.proxy.snapshot import SettingsSnap

    got = []
    monkeypatch.setattr(capture_mod.sink, "submit", lambda rec: got.append(materialize(rec)))
    k = key(capture_mode="all", chain=(rule("api_key", "K"),))
    app.holder.set(
        snapshot(
            [
                provider(1, [channel(1, base_url=f"{upstream.base}/s500", models={"m": "m"})]),
                provider(2, [channel(2, base_url=f"{upstream.base}/ok", models={"m": "m"})], priority=1),
            ],
            keys={hash_api_key(SECRET): k},
            settings=SettingsSnap(capture_enabled=True),
        )
    )
    reply = await call(app, "POST", CHAT, body(model="m", text="c"))
    assert reply.status == 200
    [rec] = got
    assert rec.client_request["model"] == "m" and rec.client_status == 200 and rec.usage_seen
    assert [a.upstream_status for a in rec.attempts] == [500, 200]
    assert rec.attempts[0].error and rec.attempts[1].error is None
    assert rec.attempts[1].executed_chain == [
        {"scope": "api_key", "transform": "test_marker", "phase": "request", "rule_id": None}
    ]
    assert rec.attempts[1].upstream_request["messages"][-1]["content"] == "c|K"
    assert rec.client_response["choices"][0]["message"]["content"] == "echo: c|K"
    orjson.dumps(rec.attempts[1].internal_request)


async def test_capture_abnormal_only_submits_abnormal(app, upstream, monkeypatch):
    from captures import recorder as capture_mod
    from captures.materialize import materialize
    from gateway.proxy.snapshot import SettingsSnap

    got = []
    monkeypatch.setattr(capture_mod.sink, "submit", lambda rec: got.append(materialize(rec)))
    app.holder.set(
        snapshot(
            [provider(1, [channel(1, base_url=f"{upstream.base}/ok", models={"m": "m"})])],
            keys={hash_api_key(SECRET): key(capture_mode="abnormal")},
            settings=SettingsSnap(capture_enabled=True),
        )
    )
    assert (await call(app, "POST", CHAT, body(model="m"))).status == 200
    assert got == []
    assert (await call(app, "POST", CHAT, body(model="nope"))).status == 404
    assert len(got) == 1 and got[0].client_status == 404


async def test_each_attempt_starts_from_the_clients_request(app, upstream):
    k = key(chain=(rule("api_key", "K"),))
    app.holder.set(
        snapshot(
            [
                provider(
                    1,
                    [channel(1, base_url=f"{upstream.base}/s500", models={"m": "up-1"})],
                    chain=(rule("provider", "P1"),),
                ),
                provider(
                    2,
                    [channel(2, base_url=f"{upstream.base}/ok", models={"m": "up-2"})],
                    priority=1,
                    chain=(rule("provider", "P2"),),
                ),
            ],
            keys={hash_api_key(SECRET): k},
        )
    )
    reply = await call(app, "POST", CHAT, body(model="m", text="q"))
    assert reply.status == 200
    assert [b["messages"][-1]["content"] for b in upstream.bodies] == ["q|P1|K", "q|P2|K"]
    assert [b["model"] for b in upstream.bodies] == ["up-1", "up-2"]


async def test_the_rules_selected_for_a_model_are_kept_per_snapshot_chains():
    """``select`` keeps its answer per (chains, phase, model): a new snapshot (new chain tuples)
    selects afresh, and chains given as lists (which may change) are never kept."""
    from gateway.proxy.chain import select

    def rule(rid, phase, models):
        return CompiledRule(rid, "global", phase, models, Marker({"tag": str(rid)}))

    chains = [(rule(1, "request", ("gpt-*",)),), (rule(2, "response", None), rule(3, "request", ("m",))), ()]
    assert [r.rule_id for r in select(chains, "request", "gpt-4o")] == [1]
    assert select(chains, "request", "gpt-4o") is select(list(chains), "request", "gpt-4o")  # same tuples
    assert [r.rule_id for r in select(chains, "request", "m")] == [3]
    assert [r.rule_id for r in select(chains, "response", "m")] == [2]
    reloaded = [(rule(4, "request", ("m",)),), chains[1], ()]  # a new snapshot's provider chain
    assert [r.rule_id for r in select(reloaded, "request", "m")] == [4, 3]
    changing = [[rule(5, "request", None)], (), ()]
    assert [r.rule_id for r in select(changing, "request", "m")] == [5]
    changing[0].append(rule(6, "request", None))
    assert [r.rule_id for r in select(changing, "request", "m")] == [5, 6]
