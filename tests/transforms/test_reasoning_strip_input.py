"""reasoning_strip_input: reasoning leaves the request history, order of the rest kept."""

from gateway.urp import ReasoningNode, Request, TextNode, ToolCallNode
from transforms.base import TransformContext
from transforms.registry import canonical_id, registry

TYPE_ID = "reasoning_strip_input"


def test_reference_example():
    nodes = [
        TextNode(content="u1"),
        ReasoningNode(encrypted="e"),
        TextNode(role="assistant", content="a"),
        ToolCallNode(call_id="c", name="f"),
        TextNode(content="u2"),
    ]
    req = Request(model="m", input=list(nodes))
    registry()[TYPE_ID]().apply_request(req, TransformContext(logical_model="m", client_protocol="responses"))
    assert req.input == [nodes[0], nodes[2], nodes[3], nodes[4]]


def test_alias():
    assert canonical_id("strip_input_reasoning") == TYPE_ID
