"""Responses request codec: wire body in, URP out, wire body back (same- and cross-protocol)."""

from __future__ import annotations

import copy

import pytest

from gateway.errors import ProtocolError
from gateway.protocols import responses
from gateway.protocols.base import EncodeContext
from gateway.urp import (
    EnvelopeExtraNode,
    FileNode,
    ImageNode,
    ProviderItemNode,
    ReasoningConfig,
    ReasoningNode,
    Request,
    TextNode,
    ToolCallNode,
    ToolDef,
    ToolResultNode,
)

LARK = 'start: begin_patch hunk+ end_patch\nbegin_patch: "*** Begin Patch" LF\n'


def codex_body() -> dict:
    """A request shaped like the ones OpenAI's Codex CLI sends, plus every item kind we map."""
    return {
        "model": "gpt-5-codex",
        "instructions": "You are Codex.",
        "input": [
            {
                "type": "message",
                "role": "developer",
                "content": [{"type": "input_text", "text": "sandbox: on"}],
            },
            {
                "type": "message",
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "look", "x_part": 1},
                    {"type": "input_image", "image_url": "https://x/y.png", "detail": "high"},
                    {"type": "input_image", "file_id": "file-img", "detail": "auto"},
                    {"type": "input_file", "file_id": "file-1"},
                    {
                        "type": "input_file",
                        "filename": "a.pdf",
                        "file_data": "data:application/pdf;base64,QUJD",
                    },
                    {"type": "input_audio_future", "data": "zz"},
                ],
                "x_env": {"k": 1},
            },
            {"role": "user", "content": "plain string content"},
            {"role": "user", "content": "second item, same role"},
            {
                "type": "reasoning",
                "id": "rs_1",
                "summary": [
                    {"type": "summary_text", "text": "**Plan**"},
                    {"type": "summary_text", "text": "do it"},
                ],
                "content": [{"type": "reasoning_text", "text": "raw cot"}],
                "encrypted_content": "gAAA==",
            },
            {
                "type": "message",
                "role": "assistant",
                "id": "msg_1",
                "phase": "commentary",
                "content": [{"type": "output_text", "text": "Working", "annotations": []}],
            },
            {
                "type": "function_call",
                "id": "fc_1",
                "call_id": "call_1",
                "name": "shell",
                "arguments": '{"cmd":["ls"]}',
                "status": "completed",
            },
            {
                "type": "function_call",
                "call_id": "call_ns",
                "name": "search",
                "namespace": "crm",
                "arguments": "{}",
            },
            {"type": "function_call_output", "call_id": "call_1", "output": "a.txt"},
            {
                "type": "function_call_output",
                "call_id": "call_ns",
                "output": [
                    {"type": "input_text", "text": "found"},
                    {"type": "input_image", "image_url": "data:image/png;base64,AAAA", "detail": "low"},
                ],
            },
            {
                "type": "custom_tool_call",
                "id": "ctc_1",
                "call_id": "call_2",
                "name": "apply_patch",
                "input": "*** Begin Patch\n*** End Patch",
            },
            {"type": "custom_tool_call_output", "call_id": "call_2", "output": "Done!"},
            {"type": "item_reference", "id": "msg_old"},
            {"type": "message", "role": "assistant", "content": [{"type": "refusal", "refusal": "no"}]},
            {
                "type": "message",
                "role": "assistant",
                "phase": "final_answer",
                "content": [{"type": "output_text", "text": "All done"}],
            },
        ],
        "tools": [
            {
                "type": "function",
                "name": "shell",
                "description": "Runs a command",
                "parameters": {"type": "object", "properties": {"cmd": {"type": "array"}}},
                "strict": False,
            },
            {
                "type": "custom",
                "name": "apply_patch",
                "description": "Patch files",
                "format": {"type": "grammar", "syntax": "lark", "definition": LARK},
            },
            {
                "type": "namespace",
                "name": "crm",
                "description": "CRM tools",
                "tools": [
                    {
                        "type": "function",
                        "name": "search",
                        "parameters": {"type": "object"},
                        "defer_loading": True,
                    },
                    {"type": "custom", "name": "note"},
                ],
            },
            {"type": "web_search", "search_context_size": "low"},
            {"type": "tool_search"},
        ],
        "tool_choice": {
            "type": "allowed_tools",
            "mode": "auto",
            "tools": [{"type": "function", "name": "shell"}, {"type": "web_search"}],
        },
        "parallel_tool_calls": False,
        "reasoning": {"effort": "medium", "summary": "auto"},
        "store": False,
        "stream": True,
        "include": ["reasoning.encrypted_content"],
        "prompt_cache_key": "abc",
        "text": {
            "verbosity": "low",
            "format": {"type": "json_schema", "name": "out", "schema": {"type": "object"}, "strict": True},
        },
        "max_output_tokens": 1000,
        "temperature": None,
        "service_tier": "auto",
        "x_unknown_top": {"nested": [1, 2]},
    }


def same_ctx(model: str = "gpt-5-codex") -> EncodeContext:
    return EncodeContext(model=model, source_protocol="responses")


def test_same_protocol_round_trip_is_lossless():
    body = codex_body()
    original = copy.deepcopy(body)
    req = responses.decode_request(body)
    assert body == original, "decode must not mutate the client's body"
    assert responses.encode_request(req, same_ctx()) == original


def test_round_trip_survives_clone_and_rewrites_model():
    from gateway.urp import clone

    req = clone(responses.decode_request(codex_body()))
    out = responses.encode_request(req, same_ctx("upstream-model"))
    expected = codex_body()
    expected["model"] = "upstream-model"
    assert out == expected


def test_decoded_nodes_and_controls():
    req = responses.decode_request(codex_body())
    nodes = req.input
    assert (
        isinstance(nodes[0], TextNode)
        and nodes[0].role == "developer"
        and nodes[0].content == "You are Codex."
    )
    assert nodes[1].role == "developer" and nodes[1].content == "sandbox: on"
    env = nodes[2]
    assert isinstance(env, EnvelopeExtraNode) and env.extra == {"x_env": {"k": 1}}
    user = nodes[3:9]
    assert user[0].content == "look" and user[0].extra["x_part"] == 1
    assert (
        isinstance(user[1], ImageNode)
        and user[1].source.url == "https://x/y.png"
        and user[1].source.detail == "high"
    )
    assert user[2].source.kind == "file_id" and user[2].source.file_id == "file-img"
    assert isinstance(user[3], FileNode) and user[3].source.file_id == "file-1"
    assert user[4].source.kind == "base64" and user[4].source.media_type == "application/pdf"
    assert user[4].source.data == "QUJD" and user[4].source.filename == "a.pdf"
    assert isinstance(user[5], ProviderItemNode) and user[5].item_type == "input_audio_future"

    reasoning = next(n for n in nodes if isinstance(n, ReasoningNode))
    assert reasoning.id == "rs_1" and reasoning.summary == "**Plan**\n\ndo it"
    assert reasoning.content == "raw cot" and reasoning.encrypted == "gAAA=="

    calls = [n for n in nodes if isinstance(n, ToolCallNode)]
    assert [(c.call_id, c.name, c.tool_type, c.namespace) for c in calls] == [
        ("call_1", "shell", "function", None),
        ("call_ns", "search", "function", "crm"),
        ("call_2", "apply_patch", "custom", None),
    ]
    assert calls[2].arguments == "*** Begin Patch\n*** End Patch" and calls[0].id == "fc_1"
    results = [n for n in nodes if isinstance(n, ToolResultNode)]
    assert [(r.call_id, r.tool_type) for r in results] == [
        ("call_1", "function"),
        ("call_ns", "function"),
        ("call_2", "custom"),
    ]
    assert results[0].content[0].content == "a.txt"
    assert [type(c) for c in results[1].content] == [TextNode, ImageNode]
    assert any(isinstance(n, ProviderItemNode) and n.item_type == "item_reference" for n in nodes)
    phases = [(n.content, n.phase) for n in nodes if isinstance(n, TextNode) and n.role == "assistant"]
    assert phases == [("Working", "commentary"), ("All done", "final_answer")]

    kinds = [t.kind for t in req.tools]
    assert kinds == ["function", "custom", "namespace", "web_search", "tool_search"]
    assert req.tools[1].format["syntax"] == "lark" and req.tools[1].format["definition"] == LARK
    ns = req.tools[2]
    assert ns.name == "crm" and [(m.kind, m.name) for m in ns.tools] == [
        ("function", "search"),
        ("custom", "note"),
    ]
    assert ns.tools[0].extra == {"defer_loading": True}
    assert req.tools[3].extra == {"search_context_size": "low"}
    assert req.tool_choice == {
        "type": "allowed_tools",
        "allowed_tools": {
            "mode": "auto",
            "tools": [{"type": "function", "function": {"name": "shell"}}, {"type": "web_search"}],
        },
    }
    assert req.reasoning.effort == "medium" and req.reasoning.extra == {"summary": "auto"}
    assert req.response_format.type == "json_schema" and req.response_format.name == "out"
    assert req.response_format.strict is True and req.verbosity == "low"
    assert req.max_output_tokens == 1000 and req.parallel_tool_calls is False and req.stream is True
    assert req.temperature is None and req.extra["temperature"] is None
    for key in ("store", "include", "prompt_cache_key", "service_tier", "x_unknown_top"):
        assert key in req.extra


def test_string_input_and_absent_input():
    req = responses.decode_request({"model": "m", "input": "hi"})
    assert [(n.role, n.content) for n in req.input] == [("user", "hi")]
    assert responses.encode_request(req, same_ctx("m")) == {"model": "m", "input": "hi"}
    req = responses.decode_request({"model": "m", "previous_response_id": "resp_1"})
    assert responses.encode_request(req, same_ctx("m")) == {"model": "m", "previous_response_id": "resp_1"}


def test_instructions_as_items_restored_exactly():
    body = {"model": "m", "instructions": [{"role": "system", "content": "be brief"}], "input": "q"}
    req = responses.decode_request(body)
    assert req.input[0].role == "system" and req.input[0].content == "be brief"
    assert responses.encode_request(req, same_ctx("m")) == body


def test_changed_instruction_node_is_reencoded_not_stale():
    req = responses.decode_request({"model": "m", "instructions": "old", "input": "q"})
    req.input[0].content = "new"
    assert responses.encode_request(req, same_ctx("m"))["instructions"] == "new"


def test_tool_choice_flat_to_canonical_and_back():
    for flat, canon in [
        ("required", "required"),
        ({"type": "function", "name": "f"}, {"type": "function", "function": {"name": "f"}}),
        ({"type": "custom", "name": "apply_patch"}, {"type": "custom", "custom": {"name": "apply_patch"}}),
        ({"type": "web_search"}, {"type": "web_search"}),
        (
            {"type": "mcp", "server_label": "deepwiki", "name": "ask"},
            {"type": "mcp", "server_label": "deepwiki", "name": "ask"},
        ),
    ]:
        req = responses.decode_request({"model": "m", "input": "x", "tool_choice": flat})
        assert req.tool_choice == canon
        assert responses.encode_request(req, same_ctx("m"))["tool_choice"] == flat


@pytest.mark.parametrize(
    "raw,norm", [("minimum", "minimal"), ("HIGH", "high"), ("none", "none"), ("xhigh", "xhigh")]
)
def test_reasoning_effort_normalised(raw, norm):
    req = responses.decode_request({"model": "m", "input": "x", "reasoning": {"effort": raw}})
    assert req.reasoning.effort == norm


def test_background_true_is_rejected():
    with pytest.raises(ProtocolError) as exc:
        responses.decode_request({"model": "m", "input": "x", "background": True})
    assert exc.value.code == "background_not_supported" and exc.value.param == "background"
    req = responses.decode_request({"model": "m", "input": "x", "background": False})
    assert req.extra["background"] is False


@pytest.mark.parametrize(
    "body,param",
    [
        ({"input": "x"}, "model"),
        ({"model": "m", "input": 5}, "input"),
        ({"model": "m", "input": [{"role": "user", "content": 3}]}, "input[0].content"),
        ({"model": "m", "input": [{"role": "robot", "content": "x"}]}, "input[0].role"),
        (
            {"model": "m", "input": ["x", {"role": "user", "content": [{"type": "input_text", "text": 1}]}]},
            "input[0]",
        ),
        (
            {"model": "m", "input": [{"role": "user", "content": [{"type": "input_text", "text": 1}]}]},
            "input[0].content[0].text",
        ),
        (
            {"model": "m", "input": [{"type": "function_call", "name": "f", "arguments": "{}"}]},
            "input[0].call_id",
        ),
        (
            {"model": "m", "input": [{"type": "function_call_output", "call_id": "c", "output": 3}]},
            "input[0].output",
        ),
        ({"model": "m", "input": "x", "tools": [{"type": "function"}]}, "tools[0].name"),
        (
            {
                "model": "m",
                "input": "x",
                "tools": [{"type": "namespace", "name": "n", "tools": [{"type": "custom"}]}],
            },
            "tools[0].tools[0].name",
        ),
        ({"model": "m", "input": "x", "temperature": "hot"}, "temperature"),
        ({"model": "m", "input": "x", "max_output_tokens": True}, "max_output_tokens"),
        ({"model": "m", "input": "x", "tool_choice": {"type": "function"}}, "tool_choice.name"),
    ],
)
def test_malformed_requests_name_the_field(body, param):
    with pytest.raises(ProtocolError) as exc:
        responses.decode_request(body)
    assert exc.value.param == param


def test_internal_markers_are_never_accepted_from_the_wire():
    body = {
        "model": "m",
        "_gw_rsp_instructions": "spoof",
        "input": [
            {
                "role": "user",
                "_gw_rsp_item": {"s": True},
                "content": [{"type": "input_text", "text": "a", "_gw_file_id_origin": "messages"}],
            },
            {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}", "_gw_x": 1},
            {"type": "item_reference", "id": "x", "_gw_y": {"_gw_z": 1}},
        ],
    }
    req = responses.decode_request(body)
    assert "_gw_rsp_instructions" not in req.extra
    out = responses.encode_request(req, same_ctx("m"))
    assert "_gw_" not in repr(out)
    assert out["input"][0] == {"role": "user", "content": [{"type": "input_text", "text": "a"}]}


def test_response_format_and_verbosity_roundtrip_with_unknown_text_siblings():
    body = {"model": "m", "input": "x", "text": {"format": {"type": "json_object"}, "x_new": True}}
    req = responses.decode_request(body)
    assert req.response_format.type == "json_object"
    assert responses.encode_request(req, same_ctx("m")) == body


def test_cross_protocol_encode_groups_and_promotes_instructions():
    req = Request(
        model="client-model",
        stream=True,
        max_output_tokens=50,
        input=[
            TextNode(role="system", content="Be terse."),
            TextNode(role="user", content="Hi"),
            ImageNode(
                role="user",
                source=__import__("gateway.urp", fromlist=["MediaSource"]).MediaSource(
                    kind="base64", media_type="image/jpeg", data="QQ=="
                ),
            ),
            ReasoningNode(summary="anthropic thinking", encrypted="sig"),
            TextNode(role="assistant", content="Calling", phase="weird-phase"),
            ToolCallNode(call_id="toolu_1", name="get_weather", arguments='{"city":"Paris"}'),
            ToolResultNode(call_id="toolu_1", content=[TextNode(role="user", content="sunny")]),
            ProviderItemNode(
                origin_protocol="messages", item_type="server_tool_use", body={"type": "server_tool_use"}
            ),
        ],
        tools=[
            ToolDef(kind="function", name="get_weather", parameters={"type": "object"}),
            ToolDef(kind="bash_20250124", origin_protocol="messages", extra={"name": "bash"}),
        ],
        tool_choice={"type": "function", "function": {"name": "get_weather"}},
        reasoning=ReasoningConfig(effort="max", extra={"_gw_messages_thinking": {"type": "adaptive"}}),
    )
    out = responses.encode_request(req, EncodeContext(model="gpt-5", source_protocol="messages"))
    assert out == {
        "model": "gpt-5",
        "instructions": "Be terse.",
        "input": [
            {
                "type": "message",
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "Hi"},
                    {"type": "input_image", "image_url": "data:image/jpeg;base64,QQ==", "detail": "auto"},
                ],
            },
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Calling"}]},
            {
                "type": "function_call",
                "call_id": "toolu_1",
                "name": "get_weather",
                "arguments": '{"city":"Paris"}',
            },
            {"type": "function_call_output", "call_id": "toolu_1", "output": "sunny"},
        ],
        "tools": [
            {"type": "function", "name": "get_weather", "parameters": {"type": "object"}, "strict": False}
        ],
        "tool_choice": {"type": "function", "name": "get_weather"},
        "reasoning": {"effort": "xhigh"},
        "max_output_tokens": 50,
        "stream": True,
    }


def test_namespace_tool_call_keeps_namespace_on_encode():
    req = Request(
        model="m", input=[ToolCallNode(call_id="c", name="search", namespace="crm", arguments="{}")]
    )
    item = responses.encode_request(req, EncodeContext(model="m", source_protocol="chat_completion"))[
        "input"
    ][0]
    assert item == {
        "type": "function_call",
        "call_id": "c",
        "namespace": "crm",
        "name": "search",
        "arguments": "{}",
    }


def test_upstream_path_and_headers():
    assert responses.upstream_path("gpt-5", True) == "/v1/responses"
    assert responses.upstream_headers("sk-1")["authorization"] == "Bearer sk-1"


# -- fuzz regressions (tests/fuzz) ----------------------------------------------------------------


@pytest.mark.parametrize("role", [{"type": "auto"}, ["user"]])
def test_non_string_input_role_is_a_400_naming_it(role):
    """An object or list as an item role used to reach a set lookup and crash (500)."""
    with pytest.raises(ProtocolError) as exc:
        responses.decode_request(
            {"model": "m", "input": [{"role": "user", "content": "hi"}, {"role": role, "content": "x"}]}
        )
    assert exc.value.param == "input[1].role"
