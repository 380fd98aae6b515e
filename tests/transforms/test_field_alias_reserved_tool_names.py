"""field_alias_reserved_tool_names through the chain engine."""

from __future__ import annotations

from gateway.urp import Request, Response, TextNode, ToolCallNode, ToolDef
from gateway.urp.events import NodeDelta, NodeDone, NodeStart, ResponseDone
from transforms.base import TransformContext
from transforms.builtin.field_alias_reserved_tool_names import FieldAliasReservedToolNames
from transforms.engine import CompiledRule, StreamChain, run_request, run_response, select
from transforms.validation import validate_rule

MODEL = "grok-4"


def chains(config=None, request=True):
    cfg = {} if config is None else config
    rules = [CompiledRule(2, "global", "response", None, FieldAliasReservedToolNames(cfg))]
    if request:
        rules.insert(0, CompiledRule(1, "global", "request", None, FieldAliasReservedToolNames(cfg)))
    return [(), tuple(rules), ()]


def ctx():
    return TransformContext(
        logical_model=MODEL, client_protocol="chat_completion", upstream_protocol="chat_completion"
    )


def test_request_renames_function_and_custom_tools_history_and_choice():
    req = Request(
        model=MODEL,
        tools=[
            ToolDef(kind="function", name="view_image"),
            ToolDef(kind="web_search", name="view_image"),
            ToolDef(kind="custom", name="view_image"),
        ],
        input=[
            ToolCallNode(call_id="c1", name="view_image", arguments="{}"),
            ToolCallNode(call_id="c2", name="exec", arguments="{}"),
        ],
        tool_choice={
            "type": "allowed_tools",
            "allowed_tools": {
                "mode": "auto",
                "tools": [
                    {"type": "function", "function": {"name": "view_image"}},
                    {"type": "function", "name": "exec"},
                ],
            },
        },
    )
    c = ctx()
    run_request(select(chains(), "request", MODEL), req, c)
    assert [t.name for t in req.tools] == ["client_view_image", "view_image", "client_view_image"]
    assert [n.name for n in req.input] == ["client_view_image", "exec"]
    assert req.tool_choice["allowed_tools"]["tools"] == [
        {"type": "function", "function": {"name": "client_view_image"}},
        {"type": "function", "name": "exec"},
    ]


def test_response_restores_names_non_stream_and_stream():
    c = ctx()
    req = Request(model=MODEL, tools=[ToolDef(kind="function", name="view_image")])
    run_request(select(chains(), "request", MODEL), req, c)
    resp = Response(
        id="r",
        model="m",
        output=[
            ToolCallNode(call_id="a", name="client_view_image"),
            ToolCallNode(call_id="b", name="exec_command"),
        ],
    )
    run_response(select(chains(), "response", MODEL), resp, c)
    assert [n.name for n in resp.output] == ["view_image", "exec_command"]

    chain = StreamChain(select(chains(), "response", MODEL), c)
    done = ToolCallNode(call_id="a", name="client_view_image", arguments="{}")
    events = [
        NodeStart(index=0, node=ToolCallNode(call_id="a", name="client_view_image")),
        NodeDelta(index=0, kind="arguments", delta="{}"),
        NodeDone(index=0, node=done),
        ResponseDone(output=[done, TextNode(role="assistant", content="x")]),
    ]
    out = [o for e in events for o in chain.process(e)]
    assert out[0].node.name == "view_image" and out[1].delta == "{}" and out[2].node.name == "view_image"
    assert out[3].output[0].name == "view_image" and out[3].output[1].content == "x"


def test_response_only_reverses_what_the_request_renamed():
    c = ctx()
    req = Request(model=MODEL, tools=[ToolDef(kind="function", name="client_view_image")])
    run_request(select(chains(), "request", MODEL), req, c)
    resp = Response(id="r", model="m", output=[ToolCallNode(call_id="a", name="client_view_image")])
    run_response(select(chains(), "response", MODEL), resp, c)
    assert resp.output[0].name == "client_view_image"


def test_empty_map_is_a_no_op():
    c = ctx()
    req = Request(model=MODEL, tools=[ToolDef(kind="function", name="view_image")])
    run_request(select(chains({"aliases": {}}), "request", MODEL), req, c)
    assert req.tools[0].name == "view_image"


def test_validation():
    def errors(config):
        return validate_rule(
            transform="field_alias_reserved_tool_names",
            scope="api_key",
            phase="request",
            models=None,
            config=config,
        )

    assert errors({}) == {} and errors({"aliases": {"a": "b"}}) == {}
    for bad in (
        {"aliases": {"a": "b", "c": "b"}},
        {"aliases": {"a": "b", "b": "c"}},
        {"aliases": {"a": 1}},
        {"aliases": {"a": "a"}},
        {"aliases": {"a": ""}},
        {"aliases": {"": "x"}},
    ):
        assert "config" in errors(bad), bad
