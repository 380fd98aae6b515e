"""Pure pieces of the proxy: URL join, redirects and allow-lists, weighted order, candidate
order with the breaker, the breaker state machine, error sanitising, synthesised streams."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from gateway.proxy.breaker import BreakerBoard
from gateway.proxy.errors import QUOTA_TEXT, ClientError, describe_upstream_error, error_body, mask
from gateway.proxy.routing import candidates, model_allowed, resolve_logical_model, weighted_order
from gateway.proxy.upstream import join_url
from gateway.urp import ReasoningNode, Response, TextNode, ToolCallNode, Usage
from gateway.urp import events as ev
from gateway.urp.accumulate import Accumulator
from gateway.urp.serialize import to_jsonable
from gateway.urp.synth import response_to_events

from .helpers import channel, key, provider, snapshot


@pytest.mark.parametrize(
    ("base", "path", "expected"),
    [
        ("https://api.x.com", "/v1/chat/completions", "https://api.x.com/v1/chat/completions"),
        ("https://api.x.com/v1", "/v1/chat/completions", "https://api.x.com/v1/chat/completions"),
        ("https://api.x.com/v1/", "/v1/messages", "https://api.x.com/v1/messages"),
        ("https://gw.x.com/openai/v1", "/v1/responses", "https://gw.x.com/openai/v1/responses"),
        (
            "https://g.x.com/v1beta",
            "/v1beta/models/gem:generateContent",
            "https://g.x.com/v1beta/models/gem:generateContent",
        ),
        ("https://api.x.com/v10", "/v1/chat/completions", "https://api.x.com/v10/v1/chat/completions"),
    ],
)
def test_join_url(base, path, expected):
    assert join_url(base, path) == expected


def test_redirect_first_full_match_wins_and_defines_logical_model():
    k = key(redirects=(("gpt-4.*", "first"), ("gpt-4o", "second"), ("gpt", "partial-never")))
    assert resolve_logical_model(k, "gpt-4o") == "first"
    assert resolve_logical_model(k, "gpt-4o-mini") == "first"
    assert resolve_logical_model(k, "gpt-3") == "gpt-3"  # "gpt" must match the whole name
    assert resolve_logical_model(key(), "x") == "x"


def test_allowed_models_globs():
    k = key(allowed=("gpt-4*", "claude-?"))
    assert model_allowed(k, "gpt-4o") and model_allowed(k, "claude-3")
    assert not model_allowed(k, "claude-35") and not model_allowed(k, "GPT-4o")
    assert model_allowed(key(), "anything")


def test_weighted_order_is_weighted_and_without_replacement():
    heavy = channel(1, base_url="http://a", models={}, weight=9)
    light = channel(2, base_url="http://b", models={}, weight=1)
    rng = random.Random(42)
    firsts = Counter()
    for _ in range(2000):
        order = weighted_order(((heavy, "m"), (light, "m")), rng)
        assert sorted(c.id for c, _ in order) == [1, 2]
        firsts[order[0][0].id] += 1
    assert 0.85 < firsts[1] / 2000 < 0.95


def test_candidates_by_priority_skip_open_and_fall_back_when_all_open():
    a = channel(1, base_url="http://a", models={"m": "m-up"})
    b = channel(2, base_url="http://b", models={"m": "m"}, provider_id=2)
    c = channel(3, base_url="http://c", models={"m": "m"}, provider_id=3, weight=0)
    snap = snapshot(
        [provider(2, [b], priority=5), provider(1, [a], priority=1), provider(3, [c], priority=0)]
    )
    board = BreakerBoard()
    plan = candidates(snap, "m", board)
    assert [(r.provider.id, [(ch.id, up) for ch, up in chans]) for r, chans in plan] == [
        (1, [(1, "m-up")]),
        (2, [(2, "m")]),
    ]  # weight 0 is never routed
    for _ in range(3):
        board.record_failure(1)
    assert [r.provider.id for r, _ in candidates(snap, "m", board)] == [2]
    for _ in range(3):
        board.record_failure(2)
    assert [r.provider.id for r, _ in candidates(snap, "m", board)] == [1, 2]  # never fail closed
    assert candidates(snap, "nope", board) is None


def test_breaker_ignored_when_provider_disables_it():
    a = channel(1, base_url="http://a", models={"m": "m"})
    b = channel(2, base_url="http://b", models={"m": "m"}, provider_id=2)
    snap = snapshot([provider(1, [a], breaker=False), provider(2, [b], priority=1)])
    board = BreakerBoard()
    for _ in range(3):
        board.record_failure(1)
    assert [r.provider.id for r, _ in candidates(snap, "m", board)] == [1, 2]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_breaker_state_machine():
    clock = Clock()
    board = BreakerBoard(clock=clock)
    assert not board.record_failure(7)
    clock.now += 31  # the first failure leaves the 30 s window
    assert not board.record_failure(7)
    assert not board.record_failure(7)
    assert board.state(7) == "closed"
    assert board.record_failure(7)  # third within the window
    assert board.state(7) == "open" and board.is_open(7)
    clock.now += 59
    assert board.is_open(7)
    clock.now += 2
    assert board.state(7) == "half_open" and not board.is_open(7)
    assert board.record_failure(7)  # a failure while half-open re-opens at once
    assert board.is_open(7)
    clock.now += 61
    board.record_success(7)
    assert board.state(7) == "closed"


def test_breaker_rate_limit_cooldown_is_shorter():
    clock = Clock()
    board = BreakerBoard(clock=clock)
    board.record_failure(1)
    board.record_failure(1)
    board.record_failure(1, rate_limited=True)
    clock.now += 14
    assert board.is_open(1)
    clock.now += 2
    assert not board.is_open(1)


def test_success_resets_failure_count():
    board = BreakerBoard()
    board.record_failure(1)
    board.record_failure(1)
    board.record_success(1)
    assert not board.record_failure(1)
    assert board.state(1) == "closed"


def test_mask_and_describe_upstream_errors():
    text = mask(
        "failed calling https://api.secret-host.com/v1/x?key=1 from 10.0.0.7 api_key: abc123 sk-live_abcdefghijklmnop",
        ("hunter2-channel-key",),
    )
    assert "secret-host" not in text and "10.0.0.7" not in text and "abc123" not in text
    assert "abcdefghijklmnop" not in text
    assert mask("leak hunter2-channel-key here", ("hunter2-channel-key",)) == "leak *** here"
    msg, code, etype = describe_upstream_error(
        500, b'{"error":{"message":"db at db.internal.net down","code":"srv_err","type":"server_error"}}'
    )
    assert msg.startswith("upstream status 500: ") and "internal.net" not in msg
    assert (code, etype) == ("srv_err", "server_error")
    assert describe_upstream_error(502, b"<html>bad gateway</html>")[0] == "upstream status 502"
    assert (
        describe_upstream_error(
            429, b'{"error":{"message":"You exceeded your current quota","code":"insufficient_quota"}}'
        )[0]
        == QUOTA_TEXT
    )
    assert describe_upstream_error(400, b'{"error":{"message":"x","code":"has spaces in it"}}')[1] is None


def test_error_body_shapes_and_diagnostics():
    err = ClientError(
        502, "upstream_error", "All failed", upstream={"upstream_status": 503, "upstream_code": None}
    )
    openai = error_body("chat_completion", err)
    assert openai["error"]["code"] == "upstream_error" and openai["error"]["upstream_status"] == 503
    assert "upstream_code" not in openai["error"]
    anthropic = error_body(
        "messages",
        ClientError(403, "model_not_allowed", "no", error_type="permission_error"),
        request_id="rid",
    )
    assert anthropic["type"] == "error" and anthropic["error"]["type"] == "permission_error"
    assert anthropic["error"]["message"] == "no" and anthropic["request_id"] == "rid"


def test_synth_events_rebuild_the_response():
    resp = Response(
        id="r1",
        model="m",
        finish_reason="tool_calls",
        usage=Usage(input_tokens=1, output_tokens=2),
        output=[
            ReasoningNode(summary="think", encrypted="sig"),
            TextNode(role="assistant", content="hi"),
            ToolCallNode(call_id="c1", name="f", arguments='{"a":1}'),
        ],
    )
    events = response_to_events(resp)
    assert isinstance(events[0], ev.ResponseStart) and isinstance(events[-1], ev.ResponseDone)
    starts = [e.index for e in events if isinstance(e, ev.NodeStart)]
    dones = [e.index for e in events if isinstance(e, ev.NodeDone)]
    assert starts == dones == [0, 1, 2]
    acc = Accumulator()
    for e in events:
        if isinstance(e, ev.NodeStart | ev.NodeDelta):
            acc.feed(e)
    assert acc.output() == resp.output  # the deltas alone rebuild every node
    assert events[1].node.content == "" or events[1].node.summary is None
    assert events[-1].output == resp.output and events[-1].usage == resp.usage
    assert events[-1].finish_reason == "tool_calls"


def test_to_jsonable():
    data = to_jsonable(Response(id="r", model="m", output=[TextNode(content="x")], extra={"k": (1, b"\x00")}))
    assert data["output"][0] == {
        "type": "text",
        "id": None,
        "extra": {},
        "role": "user",
        "content": "x",
        "phase": None,
    }
    assert data["extra"] == {"k": [1, "AA=="]}
    import orjson

    orjson.dumps(data)


# -- fuzz regressions (tests/fuzz) ----------------------------------------------------------------


def test_upstream_body_nested_deeper_than_encoders_can_write_is_a_failed_attempt():
    """Such an answer decoded and then crashed the client encoder (500); it is upstream garbage:
    a failed attempt the router may fail over from."""
    from types import SimpleNamespace

    import orjson

    from gateway.errors import AttemptFailed
    from gateway.protocols import chat as chat_completions
    from gateway.proxy.recorder import NULL_RECORDER
    from gateway.proxy.whole import decode_whole

    deep: object = "x"
    for _ in range(300):
        deep = [deep]
    body = {
        "id": "c",
        "object": "chat.completion",
        "created": 1,
        "model": "up",
        "extra": deep,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}],
    }
    att = SimpleNamespace(upstream_stream=False, codec=chat_completions, channel=SimpleNamespace(api_key="k"))
    import json  # orjson itself refuses to write such a body

    with pytest.raises(AttemptFailed) as exc:
        decode_whole(att, json.dumps(body).encode(), "application/json", NULL_RECORDER)
    assert exc.value.code == "invalid_upstream_response"
    body["extra"] = [[["fine"]]]
    assert decode_whole(att, orjson.dumps(body), "application/json", NULL_RECORDER).output


def test_request_id_must_be_printable_ascii():
    """A non-ASCII id was echoed back UTF-8 encoded (garbled for the client): a fresh id instead."""
    from gateway.proxy.exchange import request_id_from

    assert request_id_from({"x-request-id": "rid-1"}) == "rid-1"
    for odd in ("\u00e9\u00e9", "a b", "x\x00y", "", "r" * 129):
        rid = request_id_from({"x-request-id": odd})
        assert rid != odd and rid.isascii() and len(rid) == 32


def test_request_ids_are_uuid4_hex_and_unique_across_forked_workers():
    """Ids come from a per-process prefix and a counter: still ``uuid4().hex``'s form, and a
    forked worker (uvicorn's workers, a restart) never repeats its parent's ids."""
    import os
    import uuid

    from gateway.proxy.exchange import new_request_id

    mine = [new_request_id() for _ in range(1000)]
    assert len(set(mine)) == len(mine)
    for rid in mine[:3] + mine[-3:]:
        parsed = uuid.UUID(hex=rid)
        assert parsed.hex == rid and parsed.version == 4 and parsed.variant == uuid.RFC_4122
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: write its ids and leave without running pytest's teardown
        try:
            os.write(write, " ".join(new_request_id() for _ in range(1000)).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        theirs = pipe.read().decode().split()
    os.waitpid(pid, 0)
    assert len(theirs) == 1000 and not set(theirs) & set(mine)
    assert {rid[:16] for rid in theirs}.isdisjoint({rid[:16] for rid in mine})  # a fresh prefix
