"""Messages non-stream responses: decode/encode, usage normalisation, stop reasons, errors."""

from __future__ import annotations

import copy

import pytest

from gateway.errors import UpstreamProtocolError
from gateway.protocols import messages
from gateway.protocols.base import EncodeContext
from gateway.urp import ReasoningNode, Response, TextNode, ToolCallNode, Usage


def anthropic_body() -> dict:
    return {
        "id": "msg_01XFD",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5-20250929",
        "content": [
            {"type": "thinking", "thinking": "hmm", "signature": "sigA"},
            {"type": "text", "text": "Here", "citations": [{"type": "char_location", "cited_text": "x"}]},
            {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"x": [1, {"y": None}]}},
            {"type": "server_tool_use", "id": "srv_1", "name": "web_search", "input": {"query": "q"}},
        ],
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "usage": {
            "input_tokens": 12,
            "cache_creation_input_tokens": 300,
            "cache_read_input_tokens": 4000,
            "output_tokens": 55,
            "cache_creation": {"ephemeral_5m_input_tokens": 300, "ephemeral_1h_input_tokens": 0},
            "service_tier": "standard",
        },
        "container": None,
    }


def test_decode_response_normalises_usage_and_keeps_stop_reason():
    resp = messages.decode_response(anthropic_body())
    assert resp.id == "msg_01XFD" and resp.finish_reason == "tool_calls"
    assert [n.type for n in resp.output] == ["reasoning", "text", "tool_call", "provider_item"]
    assert resp.output[0].summary == "hmm" and resp.output[0].encrypted == "sigA"
    assert resp.output[1].extra["citations"][0]["cited_text"] == "x"
    assert resp.output[2].arguments == '{"x":[1,{"y":null}]}'
    u = resp.usage
    assert u.input_tokens == 12 + 300 + 4000  # inclusive internally
    assert (u.output_tokens, u.cache_read_tokens, u.cache_creation_tokens) == (55, 4000, 300)
    assert u.extra["service_tier"] == "standard"
    assert resp.extra["_gw_messages_stop_reason"] == "tool_use"
    assert resp.extra["container"] is None


def test_same_family_response_round_trip_is_lossless():
    body = anthropic_body()
    resp = messages.decode_response(copy.deepcopy(body))
    out = messages.encode_response(
        resp, EncodeContext(model="claude-sonnet-4-5-20250929", source_protocol="messages")
    )
    assert out == body


def test_encode_uses_logical_model_and_subtracts_cache_tokens():
    resp = Response(
        id="resp_1",
        model="gpt-5",
        output=[TextNode(role="assistant", content="hi")],
        finish_reason="stop",
        usage=Usage(
            input_tokens=1000,
            output_tokens=7,
            cache_read_tokens=800,
            reasoning_tokens=3,
            extra={"prompt_tokens_details": {"audio_tokens": 0}},
        ),
    )
    out = messages.encode_response(resp, EncodeContext(model="my-logical", source_protocol="chat_completion"))
    assert out["model"] == "my-logical"
    assert out["usage"] == {
        "input_tokens": 200,
        "output_tokens": 7,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 800,
    }
    assert out["content"] == [{"type": "text", "text": "hi"}]
    assert out["stop_reason"] == "end_turn" and out["stop_sequence"] is None


@pytest.mark.parametrize(
    "finish,tools,expected",
    [
        ("stop", False, "end_turn"),
        ("length", False, "max_tokens"),
        ("content_filter", False, "refusal"),
        ("tool_calls", True, "tool_use"),
        ("stop", True, "tool_use"),
        ("tool_calls", False, "end_turn"),
        ("other", False, "end_turn"),
    ],
)
def test_stop_reason_mapping_cross_family(finish, tools, expected):
    output = [TextNode(role="assistant", content="x")]
    if tools:
        output.append(ToolCallNode(call_id="c", name="f", arguments="{}"))
    resp = Response(id="r", model="m", output=output, finish_reason=finish)
    out = messages.encode_response(resp, EncodeContext(model="m", source_protocol="responses"))
    assert out["stop_reason"] == expected


def test_exact_stop_reason_and_sequence_are_replayed():
    body = anthropic_body()
    body.update(stop_reason="stop_sequence", stop_sequence="###", content=[{"type": "text", "text": "a"}])
    resp = messages.decode_response(body)
    assert resp.finish_reason == "stop"
    out = messages.encode_response(resp, EncodeContext(model="m", source_protocol="messages"))
    assert (out["stop_reason"], out["stop_sequence"]) == ("stop_sequence", "###")
    body.update(stop_reason="pause_turn", stop_sequence=None)
    resp = messages.decode_response(body)
    assert resp.finish_reason == "other"
    out = messages.encode_response(resp, EncodeContext(model="m", source_protocol="messages"))
    assert out["stop_reason"] == "pause_turn"


def test_reasoning_from_other_protocols_reaches_the_client():
    resp = Response(
        id="r",
        model="m",
        finish_reason="stop",
        output=[
            ReasoningNode(id="rs_9", summary="sum", encrypted="gAAAA"),
            ReasoningNode(content="plain"),
            ReasoningNode(),  # nothing to show
            ToolCallNode(call_id="c", name="apply_patch", arguments="raw", tool_type="custom"),
        ],
    )
    out = messages.encode_response(resp, EncodeContext(model="m", source_protocol="responses"))
    assert out["content"] == [
        {"type": "thinking", "thinking": "sum", "signature": "mz1.rs_9.gAAAA"},
        {"type": "thinking", "thinking": "plain", "signature": ""},
    ]


def test_embedded_errors_and_garbage_raise_upstream_protocol_error():
    with pytest.raises(UpstreamProtocolError) as info:
        messages.decode_response(
            {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
        )
    assert info.value.error_type == "overloaded_error" and "Overloaded" in info.value.message
    with pytest.raises(UpstreamProtocolError):
        messages.decode_response({"id": "x", "content": "nope"})
    with pytest.raises(UpstreamProtocolError):
        messages.decode_response(
            {"id": "x", "content": [{"type": "tool_use", "id": "t", "name": "f", "input": 3}]}
        )


def test_error_body_shape():
    body = messages.error_body(400, "invalid_request", "bad field", param="messages[0].role")
    assert body["type"] == "error"
    # Anthropic's own error type, our code beside it (issue 19)
    assert body["error"]["type"] == "invalid_request_error" and body["error"]["message"] == "bad field"
    assert body["error"]["code"] == "invalid_request"
    for status, code, etype in [
        (401, "unauthorized", "authentication_error"),
        (403, "model_not_allowed", "permission_error"),
        (404, "model_not_found", "not_found_error"),
        (429, "rate_limit_exceeded", "rate_limit_error"),
        (422, "x", "invalid_request_error"),
        (500, "internal_error", "api_error"),
        (502, "upstream_error", "api_error"),
        (503, "no_healthy_upstream", "overloaded_error"),
    ]:
        assert messages.error_body(status, code, "m", error_type="server_error")["error"]["type"] == etype
    assert messages.error_body(529, "", "busy")["error"]["type"] == "overloaded_error"
    assert (
        messages.error_body(502, "upstream_error", "x", error_type="api_error")["error"]["type"]
        == "api_error"
    )


# -- fuzz regressions (tests/fuzz) ----------------------------------------------------------------


def test_absurd_usage_counters_are_dropped_not_summed_past_64_bits():
    """``input_tokens`` here is input + cache reads + cache writes: three counters near 2**64
    summed past what orjson can write, so encoding the response crashed."""
    import orjson

    from gateway.protocols import codec

    body = anthropic_body()
    body["usage"] = {
        "input_tokens": 2**64 - 1,
        "cache_creation_input_tokens": 2**64 - 1,
        "cache_read_input_tokens": 5,
        "output_tokens": -7,
    }
    resp = messages.decode_response(body)
    assert resp.usage.input_tokens == 5 and resp.usage.output_tokens == 0
    assert resp.usage.cache_creation_tokens is None
    for client in ("chat_completion", "responses", "messages"):
        orjson.dumps(
            codec(client).encode_response(
                copy.deepcopy(resp), EncodeContext(model="l", source_protocol="messages")
            )
        )
