"""Chat Completions response codec: decode (usage, finish reasons, embedded errors), encode for
the client, lossless same-Chat round trip."""

from __future__ import annotations

import copy

import pytest

from gateway.errors import UpstreamProtocolError
from gateway.protocols import chat as cc
from gateway.protocols.base import EncodeContext
from gateway.urp import ReasoningNode, RefusalNode, Response, TextNode, ToolCallNode, Usage

SAME = EncodeContext(model="logical", source_protocol="chat_completion")
CROSS = EncodeContext(model="logical", source_protocol="responses")

UPSTREAM = {
    "id": "chatcmpl-abc",
    "object": "chat.completion",
    "created": 1700000000,
    "model": "logical",
    "system_fingerprint": "fp_1",
    "service_tier": "default",
    "choices": [
        {
            "index": 0,
            "logprobs": None,
            "finish_reason": "tool_calls",
            "message": {
                "role": "assistant",
                "content": "Let me check.",
                "refusal": None,
                "annotations": [],
                "reasoning_details": [{"type": "reasoning.text", "text": "hmm", "index": 0}],
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "get", "arguments": '{"city":"Paris"}'},
                    },
                    {
                        "id": "call_2",
                        "type": "function",
                        "function": {"name": "get", "arguments": '{"city":"Rome"}'},
                    },
                ],
            },
        }
    ],
    "usage": {
        "prompt_tokens": 20,
        "completion_tokens": 10,
        "total_tokens": 30,
        "prompt_tokens_details": {"cached_tokens": 5, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 3, "accepted_prediction_tokens": 0},
        "cost": 0.01,
    },
}


def test_response_round_trips_losslessly():
    body = copy.deepcopy(UPSTREAM)
    resp = cc.decode_response(body)
    assert body == UPSTREAM
    assert cc.encode_response(resp, SAME) == UPSTREAM


@pytest.mark.parametrize(
    "message,finish",
    [
        ({"role": "assistant", "content": "plain"}, "stop"),
        ({"role": "assistant", "content": None, "refusal": "no"}, "content_filter"),
        ({"role": "assistant", "content": "x", "reasoning_content": "deep"}, "length"),
        (
            {
                "role": "assistant",
                "content": "x",
                "reasoning": "r",
                "reasoning_details": [
                    {"type": "reasoning.encrypted", "data": "E", "id": "r1", "format": "f"}
                ],
            },
            "stop",
        ),
    ],
)
def test_other_responses_round_trip(message, finish):
    body = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "logical",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3},
    }
    assert cc.encode_response(cc.decode_response(copy.deepcopy(body)), SAME) == body


def test_decode_maps_nodes_usage_and_finish():
    resp = cc.decode_response(copy.deepcopy(UPSTREAM))
    assert resp.id == "chatcmpl-abc" and resp.created == 1700000000
    assert resp.finish_reason == "tool_calls"
    kinds = [type(n).__name__ for n in resp.output if type(n).__name__ != "EnvelopeExtraNode"]
    assert kinds == ["ReasoningNode", "TextNode", "ToolCallNode", "ToolCallNode"]
    u = resp.usage
    assert (u.input_tokens, u.output_tokens, u.cache_read_tokens, u.reasoning_tokens) == (20, 10, 5, 3)
    assert u.extra["cost"] == 0.01


@pytest.mark.parametrize(
    "native,urp",
    [
        ("stop", "stop"),
        ("length", "length"),
        ("tool_calls", "tool_calls"),
        ("function_call", "tool_calls"),
        ("content_filter", "content_filter"),
        ("insufficient_system_resource", "other"),
    ],
)
def test_finish_reason_mapping(native, urp):
    body = {
        "id": "x",
        "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "a"}, "finish_reason": native}],
    }
    resp = cc.decode_response(body)
    assert resp.finish_reason == urp
    if native != "function_call":
        assert cc.encode_response(resp, SAME)["choices"][0]["finish_reason"] == native


@pytest.mark.parametrize(
    "body",
    [
        {"error": {"message": "rate limited", "code": 429, "type": "rate_limit"}},
        {
            "id": "x",
            "choices": [
                {
                    "index": 0,
                    "error": {"message": "provider died", "code": 502},
                    "message": {"role": "assistant", "content": ""},
                    "finish_reason": "error",
                }
            ],
        },
        {
            "id": "x",
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": ""}, "finish_reason": "error"}
            ],
        },
        {"id": "x", "choices": []},
        {"id": "x"},
        ["not", "an", "object"],
    ],
)
def test_embedded_errors_and_garbage_are_upstream_failures(body):
    with pytest.raises(UpstreamProtocolError):
        cc.decode_response(body)


def test_embedded_error_keeps_status_and_message():
    with pytest.raises(UpstreamProtocolError) as exc:
        cc.decode_response({"error": {"message": "rate limited", "code": 429, "type": "rate_limit"}})
    assert exc.value.status == 429 and exc.value.message == "rate limited"


def test_cross_protocol_encode_uses_logical_model_and_joins_text():
    resp = Response(
        id="resp_1",
        model="upstream-x",
        finish_reason="stop",
        output=[
            ReasoningNode(content="plan", encrypted="blob", id="rs_1"),
            TextNode(role="assistant", content="Hello"),
            TextNode(role="assistant", content="World"),
            ToolCallNode(call_id="c1", name="f", arguments="{}"),
            ToolCallNode(call_id="c2", name="g", arguments="{}", tool_type="custom"),
        ],
        usage=Usage(
            input_tokens=7,
            output_tokens=3,
            cache_read_tokens=2,
            reasoning_tokens=1,
            extra={"input_tokens_details": {"x": 1}},
        ),
    )
    out = cc.encode_response(resp, CROSS)
    assert (
        out["model"] == "logical" and out["object"] == "chat.completion" and out["id"].startswith("chatcmpl")
    )
    choice = out["choices"][0]
    assert choice["finish_reason"] == "tool_calls"  # any tool call forces tool_calls
    msg = choice["message"]
    assert msg["content"] == "Hello\n\nWorld"
    assert msg["reasoning"] == "plan"
    assert msg["reasoning_details"] == [
        {"type": "reasoning.text", "text": "plan", "id": "rs_1", "index": 0},
        {"type": "reasoning.encrypted", "data": "blob", "id": "rs_1", "index": 1},
    ]
    assert msg["tool_calls"][1] == {"id": "c2", "type": "custom", "custom": {"name": "g", "input": "{}"}}
    assert out["usage"] == {
        "prompt_tokens": 7,
        "completion_tokens": 3,
        "total_tokens": 10,
        "prompt_tokens_details": {"cached_tokens": 2},
        "completion_tokens_details": {"reasoning_tokens": 1},
    }


def test_refusal_only_and_other_finish():
    resp = Response(id="m1", model="x", finish_reason="other", output=[RefusalNode(content="I can't")])
    out = cc.encode_response(resp, CROSS)
    assert out["choices"][0]["message"] == {"role": "assistant", "content": None, "refusal": "I can't"}
    assert out["choices"][0]["finish_reason"] == "stop"


# -- fuzz regressions (tests/fuzz) ----------------------------------------------------------------


def test_garbage_finish_reason_and_absurd_usage_decode_and_reencode():
    """A list as finish_reason crashed the reason lookup; counters near 2**64 made the encoders'
    sums overflow what orjson can write. Both are upstream garbage: tolerated, never a crash."""
    import orjson

    from gateway.protocols import codec

    body = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "up",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": ["stop"]}
        ],
        "usage": {
            "prompt_tokens": 2**64 - 1,
            "completion_tokens": 2**64 - 1,
            "total_tokens": -3,
            "prompt_tokens_details": {"cached_tokens": 2**63},
        },
    }
    resp = cc.decode_response(body)
    assert resp.finish_reason == "other"
    assert resp.usage.input_tokens == 0 and resp.usage.output_tokens == 0
    assert resp.usage.cache_read_tokens is None
    for client in ("chat_completion", "responses", "messages"):
        orjson.dumps(
            codec(client).encode_response(resp, EncodeContext(model="l", source_protocol="chat_completion"))
        )
