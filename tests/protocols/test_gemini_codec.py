"""Gemini upstream codec: request encoding, response decoding, paths and headers."""

from __future__ import annotations

import orjson
import pytest

from gateway.errors import UpstreamProtocolError
from gateway.protocols import gemini
from gateway.protocols.base import EncodeContext
from gateway.urp import (
    ImageNode,
    MediaSource,
    ProviderItemNode,
    ReasoningConfig,
    ReasoningNode,
    Request,
    ResponseFormat,
    TextNode,
    ToolCallNode,
    ToolDef,
    ToolResultNode,
)

CTX = EncodeContext(model="gemini-2.5-flash", source_protocol="chat_completion")


def tool_loop_request(**kw) -> Request:
    req = Request(
        model="logical",
        input=[
            TextNode(role="system", content="Be terse."),
            TextNode(role="developer", content="Use tools."),
            TextNode(role="user", content="Weather in Paris and time?"),
            ImageNode(role="user", source=MediaSource(kind="url", url="data:image/png;base64,iVBOR")),
            ImageNode(role="user", source=MediaSource(kind="url", url="https://x.test/cat.jpg")),
            ReasoningNode(summary="openai reasoning", encrypted="gAAAA"),  # not Gemini's: skipped
            ReasoningNode(summary="gemini thought", encrypted="SIG1", extra={gemini.SIGNATURE: "SIG1"}),
            ToolCallNode(
                call_id="call_1",
                name="get_weather",
                arguments='{"city": "Paris"}',
                extra={gemini.SIGNATURE: "SIG2"},
            ),
            ToolCallNode(call_id="call_2", name="get_time", arguments=""),
            ToolCallNode(call_id="c3", name="patch", arguments="raw", tool_type="custom"),
            ToolResultNode(call_id="call_1", content=[TextNode(role="tool", content="18C")]),
            ToolResultNode(call_id="call_2", content=[TextNode(role="tool", content="boom")], is_error=True),
            TextNode(role="assistant", content="It is 18C."),
            ProviderItemNode(origin_protocol="messages", item_type="server_tool_use", body={}),
        ],
        tools=[
            ToolDef(
                kind="function",
                name="get_weather",
                description="Weather",
                parameters={
                    "$schema": "x",
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "city": {"type": "string"},
                        "additionalProperties": {"type": "object", "additionalProperties": True},
                    },
                    "required": ["city"],
                },
            ),
            ToolDef(kind="function", name="get_time", parameters={"type": "object", "properties": {}}),
            ToolDef(kind="custom", name="patch"),
        ],
    )
    for k, v in kw.items():
        setattr(req, k, v)
    return req


def test_encode_contents_roles_parts_and_function_names():
    body = gemini.encode_request(tool_loop_request(), CTX)
    assert body["systemInstruction"] == {"parts": [{"text": "Be terse."}, {"text": "Use tools."}]}
    assert body["contents"] == [
        {
            "role": "user",
            "parts": [
                {"text": "Weather in Paris and time?"},
                {"inlineData": {"mimeType": "image/png", "data": "iVBOR"}},
                {"fileData": {"mimeType": "image/jpeg", "fileUri": "https://x.test/cat.jpg"}},
            ],
        },
        {
            "role": "model",
            "parts": [
                {"text": "gemini thought", "thought": True, "thoughtSignature": "SIG1"},
                {
                    "functionCall": {"name": "get_weather", "args": {"city": "Paris"}},
                    "thoughtSignature": "SIG2",
                },
                {"functionCall": {"name": "get_time", "args": {}}},
            ],
        },
        {
            "role": "user",
            "parts": [
                {"functionResponse": {"name": "get_weather", "response": {"output": "18C"}}},
                {"functionResponse": {"name": "get_time", "response": {"error": "boom"}}},
            ],
        },
        {"role": "model", "parts": [{"text": "It is 18C."}]},
    ]
    decls = body["tools"][0]["functionDeclarations"]
    assert decls[0] == {
        "name": "get_weather",
        "description": "Weather",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "additionalProperties": {"type": "object"}},
            "required": ["city"],
        },
    }
    assert decls[1] == {"name": "get_time"}  # empty OBJECT schemas are rejected by Gemini
    assert len(body["tools"]) == 1 and len(decls) == 2
    assert "_gw_" not in orjson.dumps(body).decode()


def test_generation_config_and_tool_config():
    req = tool_loop_request(
        temperature=0.3,
        top_p=0.9,
        max_output_tokens=512,
        stop="END",
        tool_choice={"type": "function", "function": {"name": "get_weather"}},
        response_format=ResponseFormat(
            type="json_schema",
            name="r",
            schema={"type": "object", "additionalProperties": False, "properties": {"a": {"type": "string"}}},
        ),
        reasoning=ReasoningConfig(effort="low"),
        extra={"generationConfig": {"topK": 40, "temperature": 2}, "safetySettings": []},
    )
    body = gemini.encode_request(req, CTX)
    assert body["generationConfig"] == {
        "topK": 40,
        "temperature": 0.3,
        "topP": 0.9,
        "maxOutputTokens": 512,
        "stopSequences": ["END"],
        "thinkingConfig": {"thinkingBudget": 1024, "includeThoughts": True},
        "responseMimeType": "application/json",
        "responseSchema": {"type": "object", "properties": {"a": {"type": "string"}}},
    }
    assert body["toolConfig"] == {
        "functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["get_weather"]}
    }
    assert body["safetySettings"] == []


@pytest.mark.parametrize(
    "choice,cfg",
    [
        ("auto", {"mode": "AUTO"}),
        ("required", {"mode": "ANY"}),
        ("none", {"mode": "NONE"}),
    ],
)
def test_tool_choice_modes(choice, cfg):
    body = gemini.encode_request(tool_loop_request(tool_choice=choice), CTX)
    assert body["toolConfig"] == {"functionCallingConfig": cfg}


@pytest.mark.parametrize(
    "model,effort,expected",
    [
        ("gemini-2.5-flash", "none", {"thinkingBudget": 0}),
        ("gemini-2.5-pro", "none", {"thinkingBudget": 128, "includeThoughts": True}),
        ("gemini-2.5-flash", "high", {"thinkingBudget": 16384, "includeThoughts": True}),
        ("gemini-3-pro-preview", "medium", {"thinkingLevel": "high", "includeThoughts": True}),
        ("gemini-3-flash", "minimal", {"thinkingLevel": "low", "includeThoughts": True}),
        ("gemini-2.0-flash", "high", None),
    ],
)
def test_thinking_config(model, effort, expected):
    req = Request(
        model="x", input=[TextNode(role="user", content="q")], reasoning=ReasoningConfig(effort=effort)
    )
    body = gemini.encode_request(req, EncodeContext(model=model))
    assert body.get("generationConfig", {}).get("thinkingConfig") == expected


def test_paths_and_headers():
    assert (
        gemini.upstream_path("gemini-2.5-flash", False) == "/v1beta/models/gemini-2.5-flash:generateContent"
    )
    assert (
        gemini.upstream_path("models/gemini-2.5-pro", True)
        == "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse"
    )
    assert gemini.upstream_path("tuned/a b", False) == "/v1beta/models/tuned%2Fa%20b:generateContent"
    assert gemini.upstream_headers("AIza") == {"x-goog-api-key": "AIza", "content-type": "application/json"}


def gemini_response() -> dict:
    return {
        "candidates": [
            {
                "content": {
                    "role": "model",
                    "parts": [
                        {"text": "Thinking about ", "thought": True},
                        {"text": "weather.", "thought": True},
                        {"text": "Let me check."},
                        {
                            "functionCall": {"name": "get_weather", "args": {"city": "Paris"}},
                            "thoughtSignature": "SIGX",
                        },
                        {"functionCall": {"name": "get_time", "args": {}}},
                        {"executableCode": {"language": "PYTHON", "code": "print(1)"}},
                    ],
                },
                "finishReason": "STOP",
                "index": 0,
            }
        ],
        "usageMetadata": {
            "promptTokenCount": 100,
            "candidatesTokenCount": 20,
            "thoughtsTokenCount": 30,
            "cachedContentTokenCount": 60,
            "totalTokenCount": 150,
            "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 100}],
        },
        "modelVersion": "gemini-2.5-flash",
        "responseId": "resp-abc",
    }


def test_decode_response_parts_finish_and_usage():
    resp = gemini.decode_response(gemini_response())
    assert resp.id == "resp-abc" and resp.model == "gemini-2.5-flash"
    types = [n.type for n in resp.output]
    assert types == ["reasoning", "text", "tool_call", "tool_call", "provider_item"]
    assert resp.output[0].summary == "Thinking about weather."
    assert resp.output[1].content == "Let me check."
    c1, c2 = resp.output[2], resp.output[3]
    assert orjson.loads(c1.arguments) == {"city": "Paris"} and c1.extra[gemini.SIGNATURE] == "SIGX"
    assert c1.call_id != c2.call_id and c1.call_id.startswith("call_resp-abc")
    assert resp.output[4].item_type == "executableCode" and resp.output[4].origin_protocol == "gemini"
    assert resp.finish_reason == "tool_calls"
    u = resp.usage
    assert (u.input_tokens, u.output_tokens, u.cache_read_tokens, u.reasoning_tokens) == (100, 50, 60, 30)


def test_decoded_calls_round_trip_into_the_next_request():
    resp = gemini.decode_response(gemini_response())
    call = resp.output[2]
    req = Request(
        model="x",
        input=[
            TextNode(role="user", content="q"),
            *resp.output[:4],
            ToolResultNode(call_id=call.call_id, content=[TextNode(role="tool", content="18C")]),
        ],
    )
    body = gemini.encode_request(req, CTX)
    model_parts = body["contents"][1]["parts"]
    assert {
        "functionCall": {"name": "get_weather", "args": {"city": "Paris"}},
        "thoughtSignature": "SIGX",
    } in model_parts
    assert body["contents"][2]["parts"][0]["functionResponse"]["name"] == "get_weather"


@pytest.mark.parametrize(
    "reason,finish",
    [("MAX_TOKENS", "length"), ("SAFETY", "content_filter"), ("MALFORMED_FUNCTION_CALL", "other")],
)
def test_finish_reasons(reason, finish):
    body = {"candidates": [{"content": {"parts": [{"text": "x"}]}, "finishReason": reason}]}
    assert gemini.decode_response(body).finish_reason == finish


def test_wire_call_ids_are_kept_and_replayed():
    body = {
        "candidates": [
            {
                "content": {"parts": [{"functionCall": {"id": "fc-9", "name": "f", "args": {}}}]},
                "finishReason": "STOP",
            }
        ]
    }
    call = gemini.decode_response(body).output[0]
    assert call.call_id == "fc-9"
    req = Request(
        model="x", input=[call, ToolResultNode(call_id="fc-9", content=[TextNode(role="tool", content="r")])]
    )
    out = gemini.encode_request(req, CTX)
    assert out["contents"][0]["parts"][0]["functionCall"]["id"] == "fc-9"
    assert out["contents"][1]["parts"][0]["functionResponse"]["id"] == "fc-9"


def test_errors_and_blocked_prompts():
    with pytest.raises(UpstreamProtocolError) as info:
        gemini.decode_response(
            {"error": {"code": 429, "message": "Resource exhausted", "status": "RESOURCE_EXHAUSTED"}}
        )
    assert info.value.status == 429 and info.value.code == "resource_exhausted"
    with pytest.raises(UpstreamProtocolError):
        gemini.decode_response({"candidates": []})
    blocked = gemini.decode_response({"promptFeedback": {"blockReason": "SAFETY"}})
    assert blocked.finish_reason == "content_filter" and blocked.output == []


def test_gemini3_first_function_call_of_a_turn_gets_the_documented_sentinel():
    req = Request(
        model="x",
        input=[
            TextNode(role="user", content="q"),
            ToolCallNode(call_id="a", name="f", arguments="{}"),
            ToolCallNode(call_id="b", name="g", arguments="{}"),
            ToolResultNode(call_id="a", content=[TextNode(role="tool", content="1")]),
            ToolResultNode(call_id="b", content=[TextNode(role="tool", content="2")]),
            ToolCallNode(call_id="c", name="f", arguments="{}", extra={gemini.SIGNATURE: "REAL"}),
        ],
    )
    body = gemini.encode_request(req, EncodeContext(model="gemini-3-pro-preview"))
    first, second = body["contents"][1]["parts"]
    assert (
        first["thoughtSignature"] == "skip_thought_signature_validator" and "thoughtSignature" not in second
    )
    assert body["contents"][3]["parts"][0]["thoughtSignature"] == "REAL"
    body = gemini.encode_request(req, EncodeContext(model="gemini-2.5-flash"))
    assert "thoughtSignature" not in body["contents"][1]["parts"][0]


def test_clean_schema_nullable_types_and_property_names():
    schema = {
        "type": "object",
        "properties": {"type": {"type": ["string", "null"]}, "$id": {"type": "integer"}},
        "additionalProperties": False,
    }
    assert gemini.clean_schema(schema) == {
        "type": "object",
        "properties": {"type": {"type": "string", "nullable": True}, "$id": {"type": "integer"}},
    }


# -- fuzz regressions (tests/fuzz) ----------------------------------------------------------------


def test_tool_arguments_nested_too_deep_are_kept_as_raw_text():
    """Tool-call arguments become a ``functionCall.args`` object; JSON nested deeper than orjson
    writes crashed the upstream body's serialisation."""
    args = '{"a": ' + "[" * 300 + "]" * 300 + "}"
    req = Request(
        model="m",
        input=[
            TextNode(role="user", content="hi"),
            ToolCallNode(call_id="call_1", name="f", arguments=args),
            ToolResultNode(call_id="call_1", content=[TextNode(content="ok")]),
        ],
    )
    body = gemini.encode_request(req, CTX)
    orjson.dumps(body)
    calls = [p["functionCall"] for c in body["contents"] for p in c["parts"] if "functionCall" in p]
    assert calls[0]["args"] == {"_raw": args}
