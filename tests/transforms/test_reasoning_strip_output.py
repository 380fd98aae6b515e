"""reasoning_strip_output: reasoning leaves whole responses and streams; the rest is renumbered."""

from gateway.urp import ReasoningNode, TextNode, ToolCallNode
from gateway.urp import events as ev
from tests.transforms.streams import (
    accumulated,
    check_lifecycle,
    plain,
    run_stream,
    run_whole,
    stream_of,
    terminal,
)
from transforms.registry import canonical_id, registry

TYPE_ID = "reasoning_strip_output"


def test_whole_response():
    nodes = [ReasoningNode(content="x"), TextNode(role="assistant", content="hi")]
    assert plain(run_whole(registry()[TYPE_ID](), nodes)) == [("text", "assistant", "hi")]


def test_stream_drops_reasoning_lifecycles_and_renumbers():
    nodes = [
        ReasoningNode(content="x", encrypted="e"),
        TextNode(role="assistant", content="hi"),
        ReasoningNode(summary="s"),
        ToolCallNode(call_id="c", name="f", arguments="{}"),
    ]
    out = run_stream(registry()[TYPE_ID](), stream_of(nodes, cuts=[1]))
    check_lifecycle(out)
    assert [(e.index, type(e.node).__name__) for e in out if isinstance(e, ev.NodeStart)] == [
        (0, "TextNode"),
        (1, "ToolCallNode"),
    ]
    expected = [("text", "assistant", "hi"), ("call", "c", "f", "{}")]
    assert plain(accumulated(out)) == expected
    assert plain(terminal(out)) == expected


def test_no_reasoning_is_identity():
    nodes = [TextNode(role="assistant", content="hi")]
    events = stream_of(nodes, cuts=[1])
    assert run_stream(registry()[TYPE_ID](), events) == events


def test_alias():
    assert canonical_id("strip_reasoning") == TYPE_ID
