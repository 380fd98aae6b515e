"""reasoning_to_think_xml: plaintext reasoning becomes tagged text, in whole responses and streams."""

import pytest

from gateway.urp import ReasoningNode, TextNode
from gateway.urp import events as ev
from tests.transforms.streams import (
    accumulated,
    check_lifecycle,
    done_nodes,
    plain,
    run_stream,
    run_whole,
    stream_of,
    terminal,
)
from transforms.registry import registry
from transforms.validation import validate_rule

TYPE_ID = "reasoning_to_think_xml"


def make():
    return registry()[TYPE_ID]({"tag": "think"})


def test_reference_examples():
    assert plain(run_whole(make(), [ReasoningNode(content="abc")])) == [
        ("text", "assistant", "<think>abc</think>")
    ]
    assert plain(run_whole(make(), [ReasoningNode(summary="s")])) == [("reasoning", None, "s", None)]
    assert plain(run_whole(make(), [ReasoningNode(content="")])) == [("text", "assistant", "<think></think>")]
    assert plain(run_whole(make(), [ReasoningNode(encrypted="e")])) == [("reasoning", None, None, "e")]


def test_new_text_node_has_no_id_or_extras():
    out = run_whole(make(), [ReasoningNode(id="rs_1", content="a", extra={"x": 1})])
    assert out[0].id is None and out[0].extra == {}


@pytest.mark.parametrize("cuts", [None, [1], [2, 5], []])
def test_stream_matches_whole_response(cuts):
    nodes = [
        ReasoningNode(id="rs_1", content="step one", encrypted="enc"),
        ReasoningNode(summary="only summary"),
        TextNode(role="assistant", content="answer"),
    ]
    out = run_stream(make(), stream_of(nodes, cuts))
    check_lifecycle(out)
    expected = plain(run_whole(make(), nodes))
    assert plain(accumulated(out)) == expected
    assert plain(done_nodes(out)) == expected
    assert plain(terminal(out)) == expected


def test_stream_wraps_once_not_per_fragment():
    out = run_stream(make(), stream_of([ReasoningNode(content="abc")], cuts=None))
    assert [e.delta for e in out if isinstance(e, ev.NodeDelta)] == ["<think>a", "b", "c", "</think>"]
    assert [type(e.node).__name__ for e in out if isinstance(e, ev.NodeStart)] == ["TextNode"]


def test_stream_node_without_deltas_decided_at_done():
    events = [
        ev.ResponseStart(id="r", model="m"),
        ev.NodeStart(index=0, node=ReasoningNode()),
        ev.NodeDone(index=0, node=ReasoningNode(content="x")),
        ev.ResponseDone(output=[ReasoningNode(content="x")]),
    ]
    out = run_stream(make(), events)
    check_lifecycle(out)
    assert plain(accumulated(out)) == [("text", "assistant", "<think>x</think>")]


def test_config_required():
    assert "config" in validate_rule(
        transform=TYPE_ID, scope="provider", phase="response", models=None, config={}
    )
    assert (
        validate_rule(transform=TYPE_ID, scope="api_key", phase="response", models=None, config={"tag": "t"})
        == {}
    )


def test_tag_closes_when_another_node_streams_while_reasoning_is_open():
    """Chat upstreams keep the reasoning node open while the answer streams."""
    events = [
        ev.ResponseStart(id="r", model="m"),
        ev.NodeStart(index=0, node=ReasoningNode()),
        ev.NodeDelta(index=0, kind=ev.REASONING_CONTENT, delta="abc"),
        ev.NodeStart(index=1, node=TextNode(role="assistant")),
        ev.NodeDelta(index=1, kind=ev.TEXT, delta="Hi"),
        ev.NodeDone(index=0, node=ReasoningNode(content="abc")),
        ev.NodeDone(index=1, node=TextNode(role="assistant", content="Hi")),
        ev.ResponseDone(output=[ReasoningNode(content="abc"), TextNode(role="assistant", content="Hi")]),
    ]
    out = run_stream(make(), events)
    check_lifecycle(out)
    assert "".join(e.delta for e in out if isinstance(e, ev.NodeDelta)) == "<think>abc</think>Hi"
    assert plain(terminal(out)) == [("text", "assistant", "<think>abc</think>"), ("text", "assistant", "Hi")]
