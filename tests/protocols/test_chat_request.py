"""Chat Completions request codec: decode rules, 400s, lossless same-Chat round trip, encode rules."""

from __future__ import annotations

import copy

import pytest

from gateway.errors import ProtocolError
from gateway.protocols import chat as cc
from gateway.protocols.base import EncodeContext
from gateway.urp import (
    AudioNode,
    EnvelopeExtraNode,
    FileNode,
    ImageNode,
    MediaSource,
    ProviderItemNode,
    ReasoningConfig,
    ReasoningNode,
    Request,
    TextNode,
    ToolCallNode,
    ToolDef,
    ToolResultNode,
)

SAME = EncodeContext(model="up-model", source_protocol="chat_completion")
CROSS = EncodeContext(model="up-model", source_protocol="messages")


def roundtrip(body: dict) -> dict:
    original = copy.deepcopy(body)
    out = cc.encode_request(
        cc.decode_request(body), EncodeContext(model=body["model"], source_protocol="chat_completion")
    )
    assert body == original, "decode must not mutate the client's body"
    return out


REPRESENTATIVE = {
    "model": "gpt-4o",
    "n": 1,
    "seed": 7,
    "temperature": 0.2,
    "top_p": 0.9,
    "max_tokens": 100,
    "reasoning_effort": "minimum",
    "stop": "END",
    "user": "u1",
    "verbosity": "low",
    "parallel_tool_calls": False,
    "x_vendor": {"a": 1},
    "logit_bias": None,
    "response_format": {
        "type": "json_schema",
        "json_schema": {"name": "r", "schema": {"type": "object"}, "strict": True},
    },
    "tools": [
        {
            "type": "function",
            "function": {"name": "get", "description": "d", "parameters": {"type": "object"}, "x_inner": 1},
            "x_outer": 2,
        },
        {"type": "custom", "custom": {"name": "patch", "format": {"type": "grammar", "syntax": "lark"}}},
        {"type": "web_search_preview_vendor", "cfg": 1},
    ],
    "tool_choice": {"type": "function", "function": {"name": "get"}},
    "messages": [
        {"role": "system", "content": "sys"},
        {"role": "developer", "content": [{"type": "text", "text": "dev"}]},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAA", "detail": "low"}},
                {"type": "image_url", "image_url": {"url": "https://x/y.png", "vendor": 1}},
            ],
        },
        {"role": "user", "content": "again", "x_msg": True},
        {
            "role": "assistant",
            "content": None,
            "reasoning_details": [
                {
                    "type": "reasoning.text",
                    "text": "think",
                    "index": 0,
                    "format": "anthropic-claude-v1",
                    "signature": "sig",
                },
                {"type": "reasoning.encrypted", "data": "enc", "index": 1},
            ],
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "get", "arguments": '{"q":1}'}},
                {"id": "c2", "type": "custom", "custom": {"name": "patch", "input": "*** Begin"}},
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "r1"},
        {"role": "tool", "tool_call_id": "c2", "content": [{"type": "text", "text": "r2"}]},
        {"role": "assistant", "content": "done", "reasoning_content": "rc", "refusal": None},
        {"role": "assistant", "content": "second assistant turn kept separate", "phase": "final_answer"},
        {
            "role": "user",
            "content": [
                {"type": "input_audio", "input_audio": {"data": "AU", "format": "wav"}},
                {
                    "type": "file",
                    "file": {"file_data": "data:application/pdf;base64,PDF", "filename": "a.pdf"},
                },
                {"type": "file", "file": {"file_id": "file-1"}},
                {"type": "video_url", "video_url": {"url": "https://v"}},
            ],
        },
        {"role": "assistant", "content": "", "audio": {"id": "audio_1"}},
    ],
}


def test_representative_request_round_trips_losslessly():
    assert roundtrip(copy.deepcopy(REPRESENTATIVE)) == REPRESENTATIVE


@pytest.mark.parametrize(
    "body",
    [
        {"model": "m", "messages": [{"role": "user", "content": "hi"}]},
        {
            "model": "m",
            "messages": [{"role": "user", "content": "hi"}],
            "stream": True,
            "stream_options": {"include_usage": True, "x": 1},
        },
        {
            "model": "m",
            "max_completion_tokens": 5,
            "messages": [{"role": "user", "content": [{"type": "text", "text": "a"}]}],
        },
        {"model": "m", "messages": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]},
        {
            "model": "m",
            "reasoning": {"effort": "high", "exclude": True},
            "reasoning_effort": "high",
            "messages": [{"role": "user", "content": "a"}],
        },
        {
            "model": "m",
            "stop": ["a", "b"],
            "tool_choice": "none",
            "tools": [],
            "messages": [{"role": "user", "content": "a"}],
        },
        {
            "model": "m",
            "messages": [
                {
                    "role": "assistant",
                    "content": "x",
                    "reasoning": "r",
                    "reasoning_details": [{"type": "reasoning.summary", "summary": "s", "id": "rs1"}],
                },
                {"role": "assistant", "function_call": {"name": "f", "arguments": "{}"}, "content": None},
                {"role": "function", "name": "f", "content": "out"},
                {"role": "user", "content": "y"},
            ],
        },
        {
            "model": "m",
            "functions": [{"name": "f", "parameters": {"type": "object"}}],
            "function_call": {"name": "f"},
            "messages": [{"role": "user", "content": "a"}],
        },
        {
            "model": "m",
            "functions": [{"name": "f"}],
            "tools": [{"type": "function", "function": {"name": "g"}}],
            "function_call": "auto",
            "messages": [{"role": "user", "content": "a"}],
        },
    ],
)
def test_more_shapes_round_trip(body):
    assert roundtrip(copy.deepcopy(body)) == body


def test_decode_maps_roles_parts_and_tools():
    req = cc.decode_request(copy.deepcopy(REPRESENTATIVE))
    kinds = [type(n).__name__ for n in req.input]
    assert kinds[:4] == ["TextNode", "TextNode", "TextNode", "ImageNode"]
    assert req.input[0].role == "system" and req.input[1].role == "developer"
    assert req.input[2].extra["cache_control"] == {"type": "ephemeral"}
    image = req.input[3]
    assert isinstance(image, ImageNode) and image.source.kind == "url"
    assert image.source.url.startswith("data:image/png;base64,") and image.source.detail == "low"
    env = next(n for n in req.input if isinstance(n, EnvelopeExtraNode))
    assert env.extra == {"x_msg": True}
    assert isinstance(req.input[req.input.index(env) + 1], TextNode)  # control node sits right before
    reasoning = [n for n in req.input if isinstance(n, ReasoningNode)]
    assert reasoning[0].content == "think" and reasoning[0].encrypted == "sig"
    assert reasoning[1].encrypted == "enc"
    assert reasoning[2].content == "rc"
    calls = [n for n in req.input if isinstance(n, ToolCallNode)]
    assert [(c.call_id, c.tool_type) for c in calls] == [("c1", "function"), ("c2", "custom")]
    results = [n for n in req.input if isinstance(n, ToolResultNode)]
    assert [(r.call_id, r.tool_type) for r in results] == [("c1", "function"), ("c2", "custom")]
    assert isinstance(req.input[-2], ProviderItemNode)  # message-level audio, before content
    assert any(isinstance(n, AudioNode) for n in req.input)
    assert any(isinstance(n, ProviderItemNode) and n.item_type == "video_url" for n in req.input)
    files = [n for n in req.input if isinstance(n, FileNode)]
    assert files[0].source.media_type == "application/pdf" and files[0].source.data == "PDF"
    assert files[1].source.file_id == "file-1"
    assert [n.phase for n in req.input if isinstance(n, TextNode) and n.phase] == ["final_answer"]
    assert req.max_output_tokens == 100 and req.reasoning.effort == "minimal"
    assert req.stop == "END" and req.user == "u1" and req.verbosity == "low"
    assert req.response_format.type == "json_schema" and req.response_format.name == "r"
    assert req.extra["seed"] == 7 and req.extra["x_vendor"] == {"a": 1} and req.extra["n"] == 1
    assert [t.kind for t in req.tools] == ["function", "custom", "web_search_preview_vendor"]
    assert req.tools[0].extra == {"x_outer": 2} and req.tools[0].inner_extra == {"x_inner": 1}
    assert req.tools[1].format == {"type": "grammar", "syntax": "lark"}


@pytest.mark.parametrize(
    "body,param",
    [
        ({"messages": [{"role": "user", "content": "x"}]}, "model"),
        ({"model": "m"}, "messages"),
        ({"model": "m", "n": 2, "messages": [{"role": "user", "content": "x"}]}, "n"),
        ({"model": "m", "messages": [{"role": "wizard", "content": "x"}]}, "messages[0].role"),
        ({"model": "m", "messages": [{"role": "user", "content": 5}]}, "messages[0].content"),
        (
            {"model": "m", "messages": [{"role": "user", "content": [{"type": "text"}]}]},
            "messages[0].content[0].text",
        ),
        ({"model": "m", "messages": [{"role": "tool", "content": "x"}]}, "messages[0].tool_call_id"),
        (
            {
                "model": "m",
                "messages": [
                    {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [{"type": "function", "function": {"name": "f"}}],
                    }
                ],
            },
            "messages[0].tool_calls[0].id",
        ),
        ({"model": "m", "temperature": "hot", "messages": [{"role": "user", "content": "x"}]}, "temperature"),
        ({"model": "m", "stop": 3, "messages": [{"role": "user", "content": "x"}]}, "stop"),
        (
            {
                "model": "m",
                "tools": [{"type": "function", "function": {}}],
                "messages": [{"role": "user", "content": "x"}],
            },
            "tools[0].function.name",
        ),
    ],
)
def test_malformed_requests_name_the_field(body, param):
    with pytest.raises(ProtocolError) as exc:
        cc.decode_request(body)
    assert exc.value.param == param


def test_spoofed_internal_keys_are_dropped():
    body = {
        "model": "m",
        "_gw_x": 1,
        "messages": [
            {"role": "user", "_gw_chat_msg": "array", "content": [{"type": "text", "text": "a", "_gw_y": 2}]}
        ],
    }
    req = cc.decode_request(body)
    assert "_gw_x" not in req.extra
    assert "_gw_y" not in req.input[0].extra
    out = cc.encode_request(req, SAME)
    assert "_gw_x" not in out and out["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "a"}]}
    ]


def test_stream_forces_include_usage_and_non_stream_drops_stream_options():
    req = cc.decode_request(
        {
            "model": "m",
            "stream": True,
            "stream_options": {"include_usage": False},
            "messages": [{"role": "user", "content": "x"}],
        }
    )
    out = cc.encode_request(req, SAME)
    assert out["stream"] is True and out["stream_options"] == {"include_usage": True}
    req.stream = False
    assert "stream_options" not in cc.encode_request(req, SAME)
    req2 = Request(model="m", input=[TextNode(content="x")], stream=True)
    assert cc.encode_request(req2, CROSS)["stream_options"] == {"include_usage": True}


def test_cross_protocol_encode_groups_nodes_into_messages():
    req = Request(
        model="claude",
        stream=False,
        max_output_tokens=64,
        reasoning=ReasoningConfig(effort="high"),
        tools=[
            ToolDef(kind="function", name="get", parameters={"type": "object"}),
            ToolDef(kind="bash_20250124", origin_protocol="messages", extra={"name": "bash"}),
        ],
        tool_choice={"type": "function", "function": {"name": "get"}},
        input=[
            TextNode(role="system", content="be brief"),
            TextNode(role="user", content="look"),
            ImageNode(role="user", source=MediaSource(kind="base64", media_type="image/jpeg", data="QQ")),
            ReasoningNode(summary="thought", encrypted="sig"),
            TextNode(role="assistant", content="calling"),
            ToolCallNode(call_id="t1", name="get", arguments='{"a":1}'),
            ToolCallNode(call_id="t2", name="get", arguments='{"a":2}'),
            ToolResultNode(call_id="t1", content=[TextNode(content="one")]),
            ToolResultNode(call_id="t2", content=[TextNode(content="two")], is_error=True),
            TextNode(role="user", content="thanks"),
        ],
    )
    out = cc.encode_request(req, CROSS)
    assert out["model"] == "up-model" and out["max_completion_tokens"] == 64
    assert out["reasoning_effort"] == "high"
    assert out["tools"] == [
        {"type": "function", "function": {"name": "get", "parameters": {"type": "object"}}}
    ]
    assert out["messages"] == [
        {"role": "system", "content": "be brief"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "look"},
                {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,QQ"}},
            ],
        },
        {
            "role": "assistant",
            "content": "calling",
            "reasoning_details": [
                {"type": "reasoning.summary", "summary": "thought", "index": 0},
                {"type": "reasoning.encrypted", "data": "sig", "index": 1},
            ],
            "tool_calls": [
                {"id": "t1", "type": "function", "function": {"name": "get", "arguments": '{"a":1}'}},
                {"id": "t2", "type": "function", "function": {"name": "get", "arguments": '{"a":2}'}},
            ],
        },
        {"role": "tool", "tool_call_id": "t1", "content": "one"},
        {"role": "tool", "tool_call_id": "t2", "content": "two"},
        {"role": "user", "content": "thanks"},
    ]


def test_effort_none_omitted_cross_protocol_and_deepseek_thinking():
    req = Request(model="m", input=[TextNode(content="x")], reasoning=ReasoningConfig(effort="none"))
    assert "reasoning_effort" not in cc.encode_request(req, CROSS)
    ds = cc.encode_request(req, EncodeContext(model="deepseek-v4", source_protocol="messages"))
    assert ds["thinking"] == {"type": "disabled"} and "reasoning_effort" not in ds
    req.reasoning = ReasoningConfig(effort="xhigh")
    req.max_output_tokens = 9
    ds = cc.encode_request(req, EncodeContext(model="deepseek-v4", source_protocol="messages"))
    assert ds["thinking"] == {"type": "enabled"} and ds["reasoning_effort"] == "max" and ds["max_tokens"] == 9


def test_openrouter_reasoning_object_gets_new_effort_when_a_transform_changed_it():
    req = cc.decode_request(
        {
            "model": "m",
            "reasoning": {"effort": "low", "max_tokens": 100},
            "messages": [{"role": "user", "content": "x"}],
        }
    )
    assert req.reasoning.effort == "low"
    req.reasoning.effort = "high"
    out = cc.encode_request(req, SAME)
    assert out["reasoning"] == {"effort": "high"} and "reasoning_effort" not in out


def test_encoder_skips_what_chat_cannot_express():
    req = Request(
        model="m",
        input=[
            TextNode(content="x"),
            FileNode(source=MediaSource(kind="url", url="https://f")),
            ImageNode(source=MediaSource(kind="file_id", file_id="file_abc")),
            ProviderItemNode(origin_protocol="responses", item_type="item_reference", body={"id": "x"}),
            AudioNode(source=MediaSource(kind="base64", media_type="audio/ogg", data="AA")),
        ],
    )
    out = cc.encode_request(req, CROSS)
    assert out["messages"] == [{"role": "user", "content": "x"}]


def test_upstream_path_headers_and_error_body():
    assert cc.upstream_path("m", True) == "/v1/chat/completions"
    assert cc.upstream_headers("sk-1")["Authorization"] == "Bearer sk-1"
    assert cc.error_body(400, "invalid_request_error", "bad", param="n") == {
        "error": {
            "message": "bad",
            "type": "invalid_request_error",
            "param": "n",
            "code": "invalid_request_error",
        }
    }
    assert cc.error_body(502, "upstream_error", "x")["error"]["type"] == "api_error"


def test_a_transform_that_rewrites_reasoning_wins_over_the_raw_entry():
    body = {
        "model": "m",
        "messages": [
            {
                "role": "assistant",
                "content": "a",
                "reasoning_details": [
                    {
                        "type": "reasoning.text",
                        "text": "secret plan",
                        "signature": "S",
                        "index": 0,
                        "format": "f",
                    }
                ],
            },
            {"role": "user", "content": "b"},
        ],
    }
    req = cc.decode_request(body)
    node = next(n for n in req.input if isinstance(n, ReasoningNode))
    node.encrypted = None  # e.g. an encrypted-reasoning strip rule
    out = cc.encode_request(req, SAME)
    assert out["messages"][0]["reasoning_details"] == [
        {"type": "reasoning.text", "text": "secret plan", "format": "f", "index": 0}
    ]


def test_legacy_functions_become_ordinary_tools_cross_protocol():
    req = cc.decode_request(
        {
            "model": "m",
            "functions": [{"name": "f", "parameters": {"type": "object"}}],
            "function_call": {"name": "f"},
            "messages": [{"role": "user", "content": "a"}],
        }
    )
    assert [t.name for t in req.tools] == ["f"] and req.tool_choice == {
        "type": "function",
        "function": {"name": "f"},
    }
    out = cc.encode_request(req, CROSS)
    assert out["tools"] == [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    assert out["tool_choice"] == {"type": "function", "function": {"name": "f"}}
    assert "functions" not in out and "function_call" not in out


# -- fuzz regressions (tests/fuzz) ----------------------------------------------------------------


@pytest.mark.parametrize("role", [["user"], {"r": 1}, 3])
def test_non_string_role_is_a_400_naming_it(role):
    """A list or object as a role used to reach a set lookup and crash (500)."""
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}, {"role": role, "content": "x"}]}
    with pytest.raises(ProtocolError) as exc:
        cc.decode_request(body)
    assert exc.value.param == "messages[1].role"


@pytest.mark.parametrize(
    "choice",
    [
        {"type": {"x": 1}},
        {"type": "function", "function": {"name": ["f"]}},
        {"type": "tool", "name": {"n": 1}},
        {"type": "mcp", "server_label": [1]},
    ],
)
def test_tool_choice_with_non_string_fields_encodes_for_every_upstream(choice):
    """An object where a tool-choice type or name belongs used to crash the tool filter (which
    runs when an upstream cannot take every tool: the responses-native tool here, for the others)."""
    import orjson

    from gateway.protocols import codec
    from gateway.proxy.prepare import prepare_for_upstream

    for upstream in ("chat_completion", "responses", "messages", "gemini"):
        req = cc.decode_request(
            {
                "model": "m",
                "messages": [{"role": "user", "content": "hi"}],
                "tools": [
                    {"type": "function", "function": {"name": "f", "parameters": {}}},
                    {"type": "web_search"},
                ],
                "tool_choice": choice,
            }
        )
        prepare_for_upstream(
            req,
            upstream_protocol=upstream,
            source_protocol="chat_completion",
            strip_nested=True,
            extra_whitelist=None,
        )
        if upstream != "chat_completion":
            assert req.tool_choice is None  # it names no available tool
        orjson.dumps(
            codec(upstream).encode_request(req, EncodeContext(model="up", source_protocol="chat_completion"))
        )


def test_reasoning_detail_entries_drop_spoofed_markers_and_non_string_payloads():
    """The raw entry kept for replay no longer carries client ``_gw_`` keys; a signature or
    payload that is not a string is not taken as opaque reasoning."""
    req = cc.decode_request(
        {
            "model": "m",
            "messages": [
                {"role": "user", "content": "hi"},
                {
                    "role": "assistant",
                    "content": "x",
                    "reasoning_details": [
                        {
                            "type": "reasoning.text",
                            "text": "r",
                            "signature": {"s": 1},
                            "index": 0,
                            "_gw_chat_msg": "spoof",
                        },
                        {"type": "reasoning.encrypted", "data": ["d"], "index": 1},
                    ],
                },
                {"role": "user", "content": "go"},
            ],
        }
    )
    nodes = [n for n in req.input if isinstance(n, ReasoningNode)]
    assert [n.encrypted for n in nodes] == [None, None]
    raw = nodes[0].extra["_gw_chat_reasoning_detail"]
    assert "_gw_chat_msg" not in raw and raw["text"] == "r"
