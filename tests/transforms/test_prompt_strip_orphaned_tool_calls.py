"""prompt_strip_orphaned_tool_calls through the chain engine."""

from gateway.urp import Request, TextNode, ToolCallNode, ToolResultNode
from gateway.urp.nodes import EnvelopeExtraNode
from transforms.base import TransformContext
from transforms.engine import CompiledRule, run_request, select
from transforms.registry import registry
from transforms.validation import validate_rule

TYPE_ID = "prompt_strip_orphaned_tool_calls"


def run(nodes, config=None):
    cls = registry[TYPE_ID]
    rule = CompiledRule(1, "provider", "request", None, cls(config or {}))
    req = Request(model="m", input=nodes)
    run_request(
        select([(rule,), (), ()], "request", "m"),
        req,
        TransformContext(logical_model="m", client_protocol="chat_completion"),
    )
    return [(n.type, getattr(n, "call_id", None)) for n in req.input]


def result(call_id):
    return ToolResultNode(call_id=call_id, content=[TextNode(content="ok")])


def test_removes_calls_without_results():
    out = run(
        [
            TextNode(content="u"),
            ToolCallNode(call_id="c1", name="f"),
            ToolCallNode(call_id="c2", name="g"),
            result("c1"),
        ]
    )
    assert out == [("text", None), ("tool_call", "c1"), ("tool_result", "c1")]


def test_orphan_result_stays():
    assert run([result("x")]) == [("tool_result", "x")]


def test_result_position_does_not_matter_and_control_nodes_stay():
    out = run(
        [
            result("c1"),
            EnvelopeExtraNode(extra={"k": 1}),
            ToolCallNode(call_id="c1", name="f"),
            ToolCallNode(call_id="c9", name="f"),
        ]
    )
    assert out == [("tool_result", "c1"), ("envelope_extra", None), ("tool_call", "c1")]


def test_no_tool_calls_is_a_noop():
    assert run([TextNode(content="a"), TextNode(role="assistant", content="b")]) == [
        ("text", None),
        ("text", None),
    ]


def test_unknown_config_keys_ignored():
    assert (
        validate_rule(transform=TYPE_ID, scope="api_key", phase="request", models=None, config={"x": 1}) == {}
    )
    assert run([ToolCallNode(call_id="c", name="f")], {"x": 1}) == []


def test_trailing_pending_call_is_removed_too():
    out = run(
        [
            TextNode(content="u"),
            TextNode(role="assistant", content="calling"),
            ToolCallNode(call_id="c", name="f"),
        ]
    )
    assert out == [("text", None), ("text", None)]
