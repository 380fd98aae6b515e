"""Responses non-stream response codec: upstream object in, URP, client object out."""

from __future__ import annotations

import copy

import pytest

from gateway.errors import UpstreamProtocolError
from gateway.protocols import responses
from gateway.protocols.base import EncodeContext
from gateway.urp import ReasoningNode, RefusalNode, Response, TextNode, ToolCallNode, Usage


def upstream_object() -> dict:
    return {
        "id": "resp_abc",
        "object": "response",
        "created_at": 1741476542,
        "status": "completed",
        "error": None,
        "incomplete_details": None,
        "instructions": None,
        "max_output_tokens": None,
        "model": "gpt-5-2025-08-07",
        "output": [
            {
                "id": "rs_1",
                "type": "reasoning",
                "summary": [{"type": "summary_text", "text": "Thinking"}],
                "encrypted_content": "gAAAA",
            },
            {
                "id": "msg_1",
                "type": "message",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "Hello", "annotations": [], "logprobs": []}],
            },
            {
                "id": "fc_1",
                "type": "function_call",
                "status": "completed",
                "call_id": "call_a",
                "name": "get_weather",
                "arguments": '{"city":"Paris"}',
            },
            {
                "id": "ctc_1",
                "type": "custom_tool_call",
                "call_id": "call_b",
                "name": "apply_patch",
                "input": "*** Begin Patch\n*** End Patch",
            },
            {"id": "ws_1", "type": "web_search_call", "status": "completed", "action": {"type": "search"}},
        ],
        "parallel_tool_calls": True,
        "previous_response_id": None,
        "reasoning": {"effort": "medium", "summary": "auto"},
        "service_tier": "default",
        "store": False,
        "temperature": 1.0,
        "text": {"format": {"type": "text"}, "verbosity": "medium"},
        "tool_choice": "auto",
        "tools": [],
        "top_p": 1.0,
        "truncation": "disabled",
        "usage": {
            "input_tokens": 100,
            "input_tokens_details": {"cached_tokens": 40},
            "output_tokens": 50,
            "output_tokens_details": {"reasoning_tokens": 20},
            "total_tokens": 150,
        },
        "user": None,
        "metadata": {},
        "x_vendor_field": {"a": 1},
    }


def test_decode_maps_output_usage_and_finish_reason():
    resp = responses.decode_response(upstream_object())
    assert resp.id == "resp_abc" and resp.model == "gpt-5-2025-08-07" and resp.created == 1741476542
    kinds = [type(n).__name__ for n in resp.output]
    assert kinds == ["ReasoningNode", "TextNode", "ToolCallNode", "ToolCallNode", "ProviderItemNode"]
    assert resp.output[0].summary == "Thinking" and resp.output[0].encrypted == "gAAAA"
    assert resp.output[1].content == "Hello" and resp.output[1].role == "assistant"
    assert resp.output[3].tool_type == "custom" and resp.output[3].arguments.startswith("*** Begin Patch")
    assert resp.finish_reason == "tool_calls"
    u = resp.usage
    assert (u.input_tokens, u.output_tokens, u.cache_read_tokens, u.reasoning_tokens) == (100, 50, 40, 20)
    assert resp.extra["x_vendor_field"] == {"a": 1}


def test_same_protocol_round_trip_is_lossless():
    body = upstream_object()
    original = copy.deepcopy(body)
    resp = responses.decode_response(body)
    out = responses.encode_response(
        resp, EncodeContext(model="gpt-5-2025-08-07", source_protocol="responses")
    )
    assert out == original


def test_same_protocol_uses_the_clients_logical_model():
    resp = responses.decode_response(upstream_object())
    out = responses.encode_response(resp, EncodeContext(model="my-alias", source_protocol="responses"))
    assert out["model"] == "my-alias"


@pytest.mark.parametrize(
    "status,details,finish",
    [
        ("incomplete", {"reason": "max_output_tokens"}, "length"),
        ("incomplete", {"reason": "content_filter"}, "content_filter"),
        ("cancelled", None, "other"),
    ],
)
def test_status_to_finish_reason(status, details, finish):
    body = upstream_object()
    body["status"], body["incomplete_details"] = status, details
    resp = responses.decode_response(body)
    assert resp.finish_reason == finish
    out = responses.encode_response(resp, EncodeContext(model="m", source_protocol="responses"))
    assert out["status"] == status and out["incomplete_details"] == details


def test_embedded_error_and_garbage_raise():
    with pytest.raises(UpstreamProtocolError) as exc:
        responses.decode_response(
            {"error": {"message": "Rate limit", "type": "requests", "code": "rate_limit"}}
        )
    assert exc.value.code == "rate_limit" and "Rate limit" in exc.value.message
    failed = upstream_object()
    failed["status"], failed["error"] = "failed", {"code": "server_error", "message": "boom"}
    with pytest.raises(UpstreamProtocolError):
        responses.decode_response(failed)
    with pytest.raises(UpstreamProtocolError):
        responses.decode_response({"id": "x", "output": "nope"})
    with pytest.raises(UpstreamProtocolError):
        responses.decode_response({"id": "x", "output": [{"type": "function_call", "name": "f"}]})
    with pytest.raises(UpstreamProtocolError):
        responses.decode_response(["not", "an", "object"])


def test_cross_protocol_encode_synthesizes_full_object_and_ids():
    resp = Response(
        id="chatcmpl-1",
        model="claude",
        created=1700000000,
        finish_reason="tool_calls",
        output=[
            ReasoningNode(summary="hmm", encrypted="sig"),
            ReasoningNode(),  # no meaningful payload: omitted
            TextNode(role="assistant", content="Let me check."),
            RefusalNode(content="partly refused"),
            ToolCallNode(call_id="toolu_1", name="lookup", arguments='{"q":1}'),
            ToolCallNode(
                call_id="toolu_2", name="apply_patch", arguments="*** Begin Patch", tool_type="custom"
            ),
        ],
        usage=Usage(
            input_tokens=10, output_tokens=5, cache_read_tokens=3, reasoning_tokens=2, cache_creation_tokens=1
        ),
    )
    out = responses.encode_response(resp, EncodeContext(model="alias", source_protocol="messages"))
    assert out["object"] == "response" and out["status"] == "completed" and out["model"] == "alias"
    assert out["created_at"] == 1700000000 and out["error"] is None and out["incomplete_details"] is None
    types = [(i["type"], i["id"][: i["id"].index("_") + 1]) for i in out["output"]]
    assert types == [
        ("reasoning", "rs_"),
        ("message", "msg_"),
        ("function_call", "fc_"),
        ("custom_tool_call", "ctc_"),
    ]
    assert out["output"][0]["summary"] == [{"type": "summary_text", "text": "hmm"}]
    assert out["output"][0]["encrypted_content"] == "sig"
    assert out["output"][1]["content"] == [
        {"type": "output_text", "text": "Let me check.", "annotations": []},
        {"type": "refusal", "refusal": "partly refused"},
    ]
    assert out["output"][2]["call_id"] == "toolu_1" and out["output"][2]["status"] == "completed"
    assert out["output"][3]["input"] == "*** Begin Patch" and "status" not in out["output"][3]
    assert out["usage"] == {
        "input_tokens": 10,
        "input_tokens_details": {"cached_tokens": 3, "cache_write_tokens": 1},
        "output_tokens": 5,
        "output_tokens_details": {"reasoning_tokens": 2},
        "total_tokens": 15,
    }


@pytest.mark.parametrize(
    "finish,status,details",
    [
        ("length", "incomplete", {"reason": "max_output_tokens"}),
        ("content_filter", "incomplete", {"reason": "content_filter"}),
        ("stop", "completed", None),
    ],
)
def test_cross_protocol_status(finish, status, details):
    resp = Response(id="x", model="m", finish_reason=finish, output=[TextNode(role="assistant", content="t")])
    out = responses.encode_response(resp, EncodeContext(model="m", source_protocol="chat_completion"))
    assert out["status"] == status and out["incomplete_details"] == details


def test_phase_change_splits_message_items():
    resp = Response(
        id="x",
        model="m",
        finish_reason="stop",
        output=[
            TextNode(role="assistant", content="thinking aloud", phase="commentary"),
            TextNode(role="assistant", content="answer", phase="final_answer"),
        ],
    )
    out = responses.encode_response(resp, EncodeContext(model="m", source_protocol="chat_completion"))
    assert [(i["phase"], i["content"][0]["text"]) for i in out["output"]] == [
        ("commentary", "thinking aloud"),
        ("final_answer", "answer"),
    ]


def test_error_body_shape():
    assert responses.error_body(400, "invalid_request_error", "bad", param="input[0]") == {
        "error": {
            "message": "bad",
            "type": "invalid_request_error",
            "param": "input[0]",
            "code": "invalid_request_error",
        }
    }
    body = responses.error_body(502, "upstream_error", "All upstream attempts failed")
    assert body["error"]["type"] == "server_error" and body["error"]["param"] is None


# -- fuzz regressions (tests/fuzz) ----------------------------------------------------------------


def test_garbage_output_ids_roles_and_absurd_usage_never_crash():
    """An output item with an object as its role was a crash (now an upstream protocol error);
    an object as a native item's id crashed the synthesised client stream; counters near 2**64
    overflowed the encoders' sums."""
    import orjson

    from gateway.protocols import codec
    from gateway.urp.synth import response_to_events

    bad_role = upstream_object()
    bad_role["output"][1]["role"] = [{"content": "x"}]
    with pytest.raises(UpstreamProtocolError):
        responses.decode_response(bad_role)

    body = upstream_object()
    body["output"].append({"type": "integer_thing", "id": {"a": 1}})
    body["usage"] = {
        "input_tokens": 2**64 - 1,
        "output_tokens": 2**64 - 1,
        "total_tokens": 3,
        "input_tokens_details": {"cached_tokens": -1},
    }
    resp = responses.decode_response(body)
    assert resp.usage.input_tokens == 0 and resp.usage.cache_read_tokens is None
    for client in ("chat_completion", "responses", "messages"):
        ctx = EncodeContext(model="l", source_protocol="responses")
        orjson.dumps(codec(client).encode_response(copy.deepcopy(resp), ctx))
        enc = codec(client).StreamEncoder(ctx)
        b"".join(enc.encode(e) for e in response_to_events(copy.deepcopy(resp)))


def test_same_protocol_encode_takes_untyped_fields_from_extra_as_rules_left_them():
    body = {
        "id": "resp_1",
        "object": "response",
        "created_at": 1,
        "status": "completed",
        "model": "m",
        "service_tier": "priority",
        "metadata": {"a": "1"},
        "output": [],
        "usage": None,
    }
    resp = responses.decode_response(body)
    assert resp.extra["service_tier"] == "priority"
    del resp.extra["service_tier"]  # what a field_remove response rule does
    resp.extra["metadata"] = {"b": "2"}  # what a field_set response rule does
    out = responses.encode_response(resp, EncodeContext(model="logical", source_protocol="responses"))
    assert "service_tier" not in out
    assert out["metadata"] == {"b": "2"}
    assert out["model"] == "logical" and out["id"] == "resp_1"
