"""Messages request decode/encode: field mappings, lossless same-protocol hops, cross-protocol
encoding and thinking controls."""

from __future__ import annotations

import copy

import pytest

from gateway.errors import ProtocolError
from gateway.protocols import messages
from gateway.protocols.base import EncodeContext
from gateway.urp import (
    EnvelopeExtraNode,
    FileNode,
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

SAME = EncodeContext(model="claude-sonnet-4-5-20250929", source_protocol="messages")


def claude_code_body() -> dict:
    """Shaped like what Claude Code posts to /v1/messages?beta=true."""
    return {
        "model": "claude-sonnet-4-5-20250929",
        "max_tokens": 32000,
        "stream": True,
        "system": [
            {"type": "text", "text": "You are Claude Code.", "cache_control": {"type": "ephemeral"}},
            {"type": "text", "text": "Env: linux", "cache_control": {"type": "ephemeral", "ttl": "1h"}},
        ],
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "<system-reminder>ctx</system-reminder>"},
                    {"type": "text", "text": "fix the bug", "cache_control": {"type": "ephemeral"}},
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0"},
                    },
                    {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}},
                    {
                        "type": "document",
                        "source": {"type": "text", "media_type": "text/plain", "data": "doc"},
                        "title": "notes",
                        "citations": {"enabled": True},
                    },
                ],
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "I should read it.", "signature": "EqQBCkYIBxgCKkA"},
                    {"type": "redacted_thinking", "data": "EmwKAhgBEgy"},
                    {"type": "text", "text": "Reading."},
                    {"type": "tool_use", "id": "toolu_01", "name": "Read", "input": {"file_path": "/a.py"}},
                    {
                        "type": "tool_use",
                        "id": "toolu_02",
                        "name": "Grep",
                        "input": {"pattern": "x", "n": [1, 2]},
                        "caller": {"type": "direct"},
                    },
                    {
                        "type": "server_tool_use",
                        "id": "srvtoolu_1",
                        "name": "web_search",
                        "input": {"query": "q"},
                    },
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_01", "content": "print(1)"},
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_02",
                        "is_error": True,
                        "content": [
                            {"type": "text", "text": "no match"},
                            {"type": "search_result", "source": "s", "title": "t", "content": []},
                        ],
                        "cache_control": {"type": "ephemeral"},
                    },
                    {"type": "text", "text": "continue"},
                ],
                "x_message_flag": {"keep": True},
            },
        ],
        "tools": [
            {
                "name": "Read",
                "description": "Read a file",
                "input_schema": {
                    "type": "object",
                    "properties": {"file_path": {"type": "string"}},
                    "required": ["file_path"],
                    "additionalProperties": False,
                    "$schema": "http://json-schema.org/draft-07/schema#",
                },
            },
            {
                "name": "Grep",
                "description": "Search",
                "input_schema": {"type": "object", "properties": {}},
                "cache_control": {"type": "ephemeral"},
                "defer_loading": True,
                "strict": True,
            },
            {"type": "custom", "name": "Ext", "input_schema": {"type": "object"}},
            {"type": "bash_20250124", "name": "bash"},
            {"type": "web_search_20250305", "name": "web_search", "max_uses": 5},
        ],
        "tool_choice": {"type": "auto"},
        "thinking": {"type": "enabled", "budget_tokens": 31999},
        "metadata": {"user_id": "user_abc_account_1_session_2"},
        "context_management": {"edits": [{"type": "clear_tool_uses_20250919"}]},
        "temperature": 1,
    }


def test_claude_code_request_round_trips_losslessly():
    body = claude_code_body()
    original = copy.deepcopy(body)
    req = messages.decode_request(body)
    assert body == original  # decode never mutates the client's body
    out = messages.encode_request(req, SAME)
    assert out == original


def test_round_trip_keeps_string_shapes_and_unknown_message_keys():
    body = {
        "model": "m",
        "max_tokens": 10,
        "system": "be brief",
        "messages": [
            {"role": "user", "content": "hi", "name": "x"},
            {"role": "assistant", "content": [{"type": "text", "text": "yo", "citations": None}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t"}]},
        ],
        "stop_sequences": ["END"],
        "top_k": 5,
        "tool_choice": {"type": "none"},
        "tools": [{"name": "t", "input_schema": {"type": "object"}}],
    }
    req = messages.decode_request(copy.deepcopy(body))
    assert isinstance(req.input[1], EnvelopeExtraNode) and req.input[1].extra == {"name": "x"}
    assert messages.encode_request(req, EncodeContext(model="m", source_protocol="messages")) == body


def test_decode_maps_typed_fields():
    req = messages.decode_request(claude_code_body())
    assert req.model == "claude-sonnet-4-5-20250929" and req.stream is True
    assert req.max_output_tokens == 32000 and req.temperature == 1
    assert req.user == "user_abc_account_1_session_2" and "metadata" not in req.extra
    assert req.extra["context_management"] == {"edits": [{"type": "clear_tool_uses_20250919"}]}
    assert req.tool_choice == "auto"
    assert req.reasoning.effort == "xhigh"
    system = req.input[:2]
    assert all(isinstance(n, TextNode) and n.role == "system" for n in system)
    assert system[0].extra == {"cache_control": {"type": "ephemeral"}}
    kinds = [(t.kind, t.name) for t in req.tools]
    assert kinds == [
        ("function", "Read"),
        ("function", "Grep"),
        ("function", "Ext"),
        ("bash_20250124", "bash"),
        ("web_search_20250305", "web_search"),
    ]
    grep = req.tools[1]
    assert grep.strict is True and grep.extra == {
        "cache_control": {"type": "ephemeral"},
        "defer_loading": True,
    }
    assert req.tools[0].parameters["required"] == ["file_path"]
    assert req.tools[4].origin_protocol == "messages" and req.tools[4].extra == {"max_uses": 5}
    nodes = req.input
    types = [n.type for n in nodes]
    assert types == [
        "text",
        "text",
        "text",
        "text",
        "image",
        "image",
        "file",
        "reasoning",
        "reasoning",
        "text",
        "tool_call",
        "tool_call",
        "provider_item",
        "envelope_extra",
        "tool_result",
        "tool_result",
        "text",
    ]
    thinking, redacted = nodes[7], nodes[8]
    assert thinking.summary == "I should read it." and thinking.encrypted == "EqQBCkYIBxgCKkA"
    assert redacted.encrypted == "EmwKAhgBEgy" and redacted.extra["_gw_reasoning_kind"] == "redacted_thinking"
    call = nodes[10]
    assert (call.call_id, call.name, call.arguments) == ("toolu_01", "Read", '{"file_path":"/a.py"}')
    assert nodes[11].extra == {"caller": {"type": "direct"}}
    assert nodes[12].item_type == "server_tool_use" and nodes[12].origin_protocol == "messages"
    res = nodes[15]
    assert res.is_error is True and res.call_id == "toolu_02"
    assert [c.type for c in res.content] == ["text", "provider_item"]
    assert isinstance(nodes[4].source, MediaSource) and nodes[4].source.kind == "base64"
    assert nodes[6].source.kind == "text" and nodes[6].extra["title"] == "notes"


def test_tool_choice_and_parallel_mapping():
    base = {
        "model": "m",
        "max_tokens": 5,
        "messages": [{"role": "user", "content": "x"}],
        "tools": [{"name": "f", "input_schema": {"type": "object"}}],
    }
    for wire, canonical in [
        ({"type": "auto"}, "auto"),
        ({"type": "any"}, "required"),
        ({"type": "none"}, "none"),
        ({"type": "tool", "name": "f"}, {"type": "function", "function": {"name": "f"}}),
    ]:
        req = messages.decode_request({**base, "tool_choice": {**wire, "disable_parallel_tool_use": True}})
        assert req.tool_choice == canonical and req.parallel_tool_calls is False
    req = messages.decode_request({**base, "tool_choice": {"type": "any"}})
    req.parallel_tool_calls = False  # e.g. changed by a transform
    out = messages.encode_request(req, SAME)
    assert out["tool_choice"] == {"type": "any", "disable_parallel_tool_use": True}


@pytest.mark.parametrize(
    "thinking,output_config,effort",
    [
        ({"type": "disabled"}, None, "none"),
        ({"type": "enabled", "budget_tokens": 1024}, None, "low"),
        ({"type": "enabled", "budget_tokens": 4000}, None, "medium"),
        ({"type": "enabled", "budget_tokens": 10000}, None, "high"),
        ({"type": "enabled", "budget_tokens": 20000}, None, "xhigh"),
        ({"type": "adaptive"}, {"effort": "low"}, "low"),
        (None, {"effort": "medium"}, "medium"),
    ],
)
def test_effort_derivation(thinking, output_config, effort):
    body = {"model": "m", "max_tokens": 64000, "messages": [{"role": "user", "content": "x"}]}
    if thinking:
        body["thinking"] = thinking
    if output_config:
        body["output_config"] = output_config
    req = messages.decode_request(body)
    assert req.reasoning.effort == effort
    out = messages.encode_request(req, EncodeContext(model="m", source_protocol="messages"))
    assert out.get("thinking") == thinking and out.get("output_config") == output_config


def test_structured_output_maps_to_response_format_and_back():
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    body = {
        "model": "m",
        "max_tokens": 100,
        "messages": [{"role": "user", "content": "x"}],
        "output_config": {"format": {"type": "json_schema", "schema": schema}},
    }
    req = messages.decode_request(copy.deepcopy(body))
    assert req.response_format.type == "json_schema" and req.response_format.schema == schema
    assert req.response_format.name == "response"
    assert messages.encode_request(req, EncodeContext(model="m", source_protocol="messages")) == body


def test_internal_keys_from_the_wire_are_dropped():
    body = {
        "model": "m",
        "max_tokens": 5,
        "_gw_messages_stop_reason": "x",
        "messages": [
            {
                "role": "user",
                "_gw_evil": 1,
                "content": [
                    {"type": "text", "text": "hi", "_gw_reasoning_kind": "redacted_thinking"},
                    {"type": "mystery", "_gw_x": 1, "nested": {"_gw_y": 2, "ok": 3}},
                ],
            }
        ],
        "metadata": {"user_id": "u", "_gw_z": 1},
    }
    req = messages.decode_request(body)
    assert not any(k.startswith("_gw_evil") or k == "_gw_messages_stop_reason" for k in req.extra)
    assert req.input[0].extra == {}
    assert req.input[1].body == {"type": "mystery", "nested": {"ok": 3}}
    out = messages.encode_request(req, SAME)
    assert "_gw_" not in repr(out)


@pytest.mark.parametrize(
    "body,param",
    [
        ({"max_tokens": 5, "messages": []}, "model"),
        ({"model": "m", "messages": "hi"}, "messages"),
        ({"model": "m", "messages": [{"role": "system", "content": "x"}]}, "messages[0].role"),
        ({"model": "m", "messages": [{"role": "user", "content": 5}]}, "messages[0].content"),
        (
            {
                "model": "m",
                "messages": [
                    {
                        "role": "assistant",
                        "content": [{"type": "tool_use", "id": "t", "name": "f", "input": "[1]"}],
                    }
                ],
            },
            "messages[0].content[0].input",
        ),
        (
            {"model": "m", "messages": [{"role": "user", "content": [{"type": "text"}]}]},
            "messages[0].content[0].text",
        ),
        ({"model": "m", "messages": [], "max_tokens": "10"}, "max_tokens"),
        ({"model": "m", "messages": [], "tools": [{"description": "no name"}]}, "tools[0].name"),
        ({"model": "m", "messages": [], "tool_choice": {"type": "sometimes"}}, "tool_choice.type"),
        ({"model": "m", "messages": [], "system": 3}, "system"),
    ],
)
def test_malformed_requests_name_the_field(body, param):
    with pytest.raises(ProtocolError) as info:
        messages.decode_request(body)
    assert info.value.param == param


# -- cross-protocol encoding -------------------------------------------------------------------


def chat_like_request(**kw) -> Request:
    """A request as the Chat or Responses decoder would build it."""
    nodes = [
        TextNode(role="system", content="sys one"),
        TextNode(role="user", content="look"),
        ImageNode(role="user", source=MediaSource(kind="url", url="data:image/jpeg;base64,/9j/4AAQ")),
        TextNode(role="developer", content="dev rule"),
        TextNode(role="assistant", content="calling"),
        ToolCallNode(call_id="c1", name="f", arguments='{"a": 1}'),
        ToolCallNode(call_id="c2", name="f", arguments="not json"),
        ToolCallNode(call_id="c3", name="patch", arguments="*** raw", tool_type="custom"),
        ToolResultNode(call_id="c1", content=[TextNode(role="tool", content="r1")]),
        ToolResultNode(call_id="c2", content=[TextNode(role="tool", content="r2")], is_error=True),
        ToolResultNode(call_id="c3", content=[TextNode(role="tool", content="ok")], tool_type="custom"),
        TextNode(role="user", content="thanks"),
        TextNode(role="user", content=""),
        ReasoningNode(content="unsigned thoughts"),
        TextNode(role="assistant", content="done"),
        ProviderItemNode(origin_protocol="responses", item_type="compaction", body={"type": "compaction"}),
    ]
    req = Request(
        model="gpt-logical",
        input=nodes,
        tools=[
            ToolDef(kind="function", name="f", description="d", parameters={"properties": {}}),
            ToolDef(kind="custom", name="patch", format={"type": "grammar"}),
            ToolDef(kind="web_search", origin_protocol="responses"),
        ],
    )
    for k, v in kw.items():
        setattr(req, k, v)
    return req


def test_cross_family_grouping_hoisting_and_conversions():
    ctx = EncodeContext(model="claude-sonnet-4-5", source_protocol="chat_completion")
    out = messages.encode_request(chat_like_request(stop="END", user="u1", parallel_tool_calls=False), ctx)
    assert out["max_tokens"] == 64000
    assert out["system"] == [{"type": "text", "text": "sys one"}, {"type": "text", "text": "dev rule"}]
    assert out["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "look"},
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/jpeg", "data": "/9j/4AAQ"},
                },
            ],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "calling"},
                {"type": "tool_use", "id": "c1", "name": "f", "input": {"a": 1}},
                {"type": "tool_use", "id": "c2", "name": "f", "input": {"_raw": "not json"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "c1", "content": "r1"},
                {"type": "tool_result", "tool_use_id": "c2", "content": "r2", "is_error": True},
                {"type": "text", "text": "thanks"},
            ],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "done"}]},
    ]
    assert out["tools"] == [
        {"name": "f", "description": "d", "input_schema": {"type": "object", "properties": {}}}
    ]
    assert out["tool_choice"] == {"type": "auto", "disable_parallel_tool_use": True}
    assert out["stop_sequences"] == ["END"] and out["metadata"] == {"user_id": "u1"}
    assert "thinking" not in out and "response_format" not in out


def test_cross_family_response_format_and_max_tokens():
    rf = ResponseFormat(type="json_schema", name="x", schema={"type": "object"}, strict=True)
    req = Request(
        model="m",
        input=[TextNode(role="user", content="x")],
        response_format=rf,
        max_output_tokens=77,
        verbosity="low",
        extra={"metadata": {"k": "v"}},
    )
    out = messages.encode_request(req, EncodeContext(model="m", source_protocol="chat_completion"))
    assert out["output_config"] == {"format": {"type": "json_schema", "schema": {"type": "object"}}}
    assert out["max_tokens"] == 77 and "metadata" not in out and "verbosity" not in out


@pytest.mark.parametrize(
    "model,effort,thinking,output_config",
    [
        ("claude-opus-4-6", "high", {"type": "adaptive"}, {"effort": "high"}),
        ("claude-sonnet-4-6", "xhigh", {"type": "adaptive"}, {"effort": "high"}),
        ("claude-opus-4-6", "max", {"type": "adaptive"}, {"effort": "max"}),
        ("claude-opus-5", "low", {"type": "adaptive"}, {"effort": "low"}),
        ("claude-sonnet-4-5-20250929", "medium", {"type": "enabled", "budget_tokens": 4096}, None),
        ("claude-3-7-sonnet-20250219", "low", {"type": "enabled", "budget_tokens": 1024}, None),
        ("glm-4.6", "high", {"type": "enabled", "budget_tokens": 16384}, None),
        ("claude-sonnet-4-5", "none", None, None),
        ("claude-opus-4-6", "none", None, None),
    ],
)
def test_thinking_generation_from_effort(model, effort, thinking, output_config):
    req = Request(
        model="x", input=[TextNode(role="user", content="q")], reasoning=ReasoningConfig(effort=effort)
    )
    out = messages.encode_request(req, EncodeContext(model=model, source_protocol="chat_completion"))
    assert out.get("thinking") == thinking
    assert out.get("output_config") == output_config


def test_generated_budget_is_clamped_below_max_tokens():
    req = Request(
        model="x",
        input=[TextNode(role="user", content="q")],
        reasoning=ReasoningConfig(effort="high"),
        max_output_tokens=8000,
    )
    out = messages.encode_request(req, EncodeContext(model="claude-sonnet-4-5", source_protocol="responses"))
    assert out["thinking"] == {"type": "enabled", "budget_tokens": 7999}
    req.max_output_tokens = 1000
    out = messages.encode_request(req, EncodeContext(model="claude-sonnet-4-5", source_protocol="responses"))
    assert "thinking" not in out


def test_changed_effort_regenerates_thinking():
    body = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 20000,
        "messages": [{"role": "user", "content": "x"}],
        "thinking": {"type": "enabled", "budget_tokens": 2000},
    }
    req = messages.decode_request(body)
    req.reasoning.effort = "high"  # e.g. a reasoning transform
    out = messages.encode_request(req, SAME)
    assert out["thinking"] == {"type": "enabled", "budget_tokens": 16384}


@pytest.mark.parametrize(
    "patch,param",
    [
        ({"thinking": {"type": "enabled", "budget_tokens": 500}}, "thinking.budget_tokens"),
        (
            {"thinking": {"type": "enabled", "budget_tokens": 5000}, "max_tokens": 4000},
            "thinking.budget_tokens",
        ),
        ({"thinking": {"type": "enabled"}}, "thinking.budget_tokens"),
        ({"thinking": {"type": "adaptive", "budget_tokens": 2000}}, "thinking.budget_tokens"),
        ({"thinking": {"type": "adaptive"}, "temperature": 0.5}, "temperature"),
        ({"thinking": {"type": "enabled", "budget_tokens": 2000}, "top_k": 5}, "top_k"),
        ({"thinking": {"type": "enabled", "budget_tokens": 2000}, "top_p": 0.5}, "top_p"),
        (
            {
                "thinking": {"type": "enabled", "budget_tokens": 2000},
                "tool_choice": {"type": "any"},
                "tools": [{"name": "f", "input_schema": {"type": "object"}}],
            },
            "tool_choice",
        ),
    ],
)
def test_thinking_validation_rejects_documented_violations(patch, param):
    body = {"model": "m", "max_tokens": 8000, "messages": [{"role": "user", "content": "x"}], **patch}
    req = messages.decode_request(body)
    with pytest.raises(ProtocolError) as info:
        messages.encode_request(req, SAME)
    assert info.value.param == param and info.value.status == 400


def test_generated_thinking_with_bad_temperature_is_rejected_not_fixed():
    req = Request(
        model="x",
        input=[TextNode(role="user", content="q")],
        reasoning=ReasoningConfig(effort="low"),
        temperature=0.2,
    )
    with pytest.raises(ProtocolError):
        messages.encode_request(
            req, EncodeContext(model="claude-opus-4-6", source_protocol="chat_completion")
        )


def test_file_ids_only_from_anthropic_and_documents():
    nodes = [
        FileNode(role="user", source=MediaSource(kind="file_id", file_id="file-openai")),
        FileNode(
            role="user",
            source=MediaSource(kind="file_id", file_id="file_ant"),
            extra={"_gw_file_id_origin": "messages"},
        ),
        FileNode(
            role="user",
            source=MediaSource(kind="base64", data="JVBER", media_type="application/pdf", filename="a.pdf"),
        ),
    ]
    out = messages.encode_request(
        Request(model="m", input=nodes), EncodeContext(model="m", source_protocol="responses")
    )
    assert out["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "document", "source": {"type": "file", "file_id": "file_ant"}},
                {
                    "type": "document",
                    "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBER"},
                },
            ],
        }
    ]


def test_signature_sigil_round_trip():
    body = {
        "model": "m",
        "max_tokens": 5,
        "messages": [
            {
                "role": "assistant",
                "content": [{"type": "thinking", "thinking": "t", "signature": "mz1.rs_123.ENC"}],
            },
            {"role": "user", "content": "go"},
        ],
    }
    req = messages.decode_request(body)
    node = req.input[0]
    assert node.id == "rs_123" and node.encrypted == "ENC"
    # the payload belongs to a Responses upstream: never sent to Anthropic as a signature
    out = messages.encode_request(req, EncodeContext(model="m", source_protocol="messages"))
    assert out["messages"] == [{"role": "user", "content": "go"}]
    assert "mz1." not in repr(out)


def test_upstream_path_and_headers():
    assert messages.upstream_path("claude-x", True) == "/v1/messages"
    headers = messages.upstream_headers("sk-ant")
    assert headers["x-api-key"] == "sk-ant" and headers["anthropic-version"] == "2023-06-01"


# -- fuzz regressions (tests/fuzz) ----------------------------------------------------------------


def test_tool_arguments_nested_too_deep_are_kept_as_raw_text():
    """Another protocol's tool-call arguments are text; parsed into Anthropic's ``input`` object,
    JSON nested deeper than orjson writes crashed the upstream body's serialisation."""
    import orjson

    from gateway.protocols import chat as cc

    args = '{"a": ' + "[" * 300 + "]" * 300 + "}"
    req = cc.decode_request(
        {
            "model": "m",
            "messages": [
                {"role": "user", "content": "hi"},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": args}}
                    ],
                },
                {"role": "tool", "tool_call_id": "call_1", "content": "ok"},
            ],
        }
    )
    body = messages.encode_request(req, EncodeContext(model="claude", source_protocol="chat_completion"))
    orjson.dumps(body)
    tool_use = [
        b for m in body["messages"] for b in m["content"] if isinstance(b, dict) and b["type"] == "tool_use"
    ]
    assert tool_use[0]["input"] == {"_raw": args}
