"""reasoning_from_think_xml: whole responses and streams split however the upstream likes."""

import pytest

from gateway.urp import ReasoningNode, TextNode, ToolCallNode
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
from transforms.registry import canonical_id, registry
from transforms.validation import validate_rule

TYPE_ID = "reasoning_from_think_xml"


def make(tag="think"):
    return registry()[TYPE_ID]({"tag": tag})


def whole(text, tag="think"):
    return plain(run_whole(make(tag), [TextNode(role="assistant", content=text)]))


def test_reference_examples():
    assert whole("<think>abc</think>Hello") == [
        ("reasoning", "abc", None, None),
        ("text", "assistant", "Hello"),
    ]
    assert whole("Hi <think>x") == [("text", "assistant", "Hi "), ("reasoning", "x", None, None)]
    assert whole("no tags") == [("text", "assistant", "no tags")]


def test_several_blocks_and_empty_pieces():
    assert whole("<think>a</think><think>b</think>c") == [
        ("reasoning", "a", None, None),
        ("reasoning", "b", None, None),
        ("text", "assistant", "c"),
    ]
    assert whole("<think></think>x") == [("text", "assistant", "x")]


def test_exact_case_sensitive_tag_and_custom_tag():
    assert whole("<THINK>a</THINK>") == [("text", "assistant", "<THINK>a</THINK>")]
    assert whole("<think >a") == [("text", "assistant", "<think >a")]
    assert whole("<reason>r</reason>ok", tag="reason") == [
        ("reasoning", "r", None, None),
        ("text", "assistant", "ok"),
    ]


def test_untagged_node_kept_with_all_fields_and_user_text_untouched():
    node = TextNode(id="msg_1", role="assistant", content="plain", phase="final_answer", extra={"k": 1})
    user = TextNode(role="user", content="<think>u</think>")
    out = run_whole(make(), [user, node])
    assert out == [user, node]


def test_first_text_piece_keeps_id_and_phase():
    out = run_whole(
        make(), [TextNode(id="msg_1", role="assistant", content="a<think>b</think>c", phase="final_answer")]
    )
    assert [(type(n).__name__, n.id) for n in out] == [
        ("TextNode", "msg_1"),
        ("ReasoningNode", None),
        ("TextNode", None),
    ]
    assert out[2].phase == "final_answer"


@pytest.mark.parametrize(
    "text",
    [
        "<think>abc</think>Hello",
        "Hi <think>x",
        "a<think>b</think>c<think>d</think>",
        "x <thi",
        "<think>r </thi",
        "lt < and <t",
        "no tags",
        "",
        "<<think>>a</think>",
        # a tag ends a piece in the stream too (found by test_reasoning_stream_property):
        "</think><think></think></think>",  # the text after an empty block is a new text node
        "a<think></think>c",
        "<think>a</think><think>b</think>c",  # two blocks, two reasoning nodes
    ],
)
def test_one_char_per_delta_matches_whole_response(text):
    nodes = [TextNode(role="assistant", content=text), ToolCallNode(call_id="c1", name="f", arguments="{}")]
    out = run_stream(make(), stream_of(nodes, cuts=None))
    check_lifecycle(out)
    expected = plain(run_whole(make(), nodes))
    assert plain(done_nodes(out)) == expected
    assert plain(terminal(out)) == expected
    assert plain(accumulated(out)) == expected


def test_never_emits_a_partial_tag_as_text():
    text = "Hi <think>secret</think>done"
    out = run_stream(make(), stream_of([TextNode(role="assistant", content=text)], cuts=None))
    streamed = "".join(e.delta for e in out if isinstance(e, ev.NodeDelta) and e.kind == ev.TEXT)
    assert streamed == "Hi done"
    assert all("<" not in e.delta for e in out if isinstance(e, ev.NodeDelta))


def test_trailing_partial_tag_is_flushed_as_text():
    out = run_stream(make(), stream_of([TextNode(role="assistant", content="end <thi")], cuts=[5]))
    texts = [e.delta for e in out if isinstance(e, ev.NodeDelta)]
    assert texts == ["end ", "<thi"]
    assert plain(terminal(out)) == [("text", "assistant", "end <thi")]


def test_later_nodes_are_renumbered():
    nodes = [TextNode(role="assistant", content="<think>r</think>t"), ToolCallNode(call_id="c", name="f")]
    out = run_stream(make(), stream_of(nodes, cuts=[3, 9]))
    check_lifecycle(out)
    assert [(e.index, type(e.node).__name__) for e in out if isinstance(e, ev.NodeStart)] == [
        (0, "ReasoningNode"),
        (1, "TextNode"),
        (2, "ToolCallNode"),
    ]
    assert isinstance(terminal(out)[0], ReasoningNode)


def test_config_and_alias():
    assert (
        validate_rule(
            transform=TYPE_ID, scope="api_key", phase="response", models=None, config={"tag": "think"}
        )
        == {}
    )
    assert "config" in validate_rule(
        transform=TYPE_ID, scope="provider", phase="response", models=None, config={}
    )
    assert "config" in validate_rule(
        transform=TYPE_ID, scope="provider", phase="response", models=None, config={"tag": ""}
    )
    assert "phase" in validate_rule(
        transform=TYPE_ID, scope="provider", phase="request", models=None, config={"tag": "think"}
    )
    assert canonical_id("think_xml_to_reasoning") == TYPE_ID
