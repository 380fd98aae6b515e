"""role_merge_consecutive through the chain engine."""

from gateway.urp import ImageNode, MediaSource, Request, TextNode, ToolCallNode
from gateway.urp.nodes import EnvelopeExtraNode
from transforms.base import TransformContext
from transforms.engine import CompiledRule, run_request, select
from transforms.registry import registry
from transforms.validation import validate_rule

TYPE_ID = "role_merge_consecutive"


def run(nodes, config=None):
    rule = CompiledRule(1, "provider", "request", None, registry[TYPE_ID](config or {}))
    req = Request(model="m", input=nodes)
    run_request(
        select([(rule,), (), ()], "request", "m"),
        req,
        TransformContext(logical_model="m", client_protocol="chat_completion"),
    )
    return req.input


def shape(nodes):
    return [
        (n.type, getattr(n, "role", None), getattr(n, "content", None) if n.type == "text" else None)
        for n in nodes
    ]


def test_merges_adjacent_same_role_text_without_separator():
    out = run([TextNode(content="a"), TextNode(content="b"), TextNode(role="assistant", content="c")])
    assert shape(out) == [("text", "user", "ab"), ("text", "assistant", "c")]


def test_longer_runs_and_several_groups():
    out = run(
        [
            TextNode(content="1"),
            TextNode(content="2"),
            TextNode(content="3"),
            TextNode(role="assistant", content="x"),
            TextNode(role="assistant", content="y"),
        ]
    )
    assert shape(out) == [("text", "user", "123"), ("text", "assistant", "xy")]


def test_image_breaks_the_run():
    nodes = [
        TextNode(content="a"),
        ImageNode(role="user", source=MediaSource(kind="url", url="u")),
        TextNode(content="b"),
    ]
    assert shape(run(nodes)) == [("text", "user", "a"), ("image", "user", None), ("text", "user", "b")]


def test_tool_call_and_control_nodes_break_the_run():
    out = run(
        [
            TextNode(role="assistant", content="a"),
            ToolCallNode(call_id="c", name="f"),
            TextNode(role="assistant", content="b"),
            EnvelopeExtraNode(extra={}),
            TextNode(role="assistant", content="c"),
        ]
    )
    assert len(out) == 5


def test_different_phase_not_merged():
    out = run(
        [
            TextNode(role="assistant", content="a", phase="commentary"),
            TextNode(role="assistant", content="b", phase="final_answer"),
            TextNode(role="assistant", content="c", phase="final_answer"),
        ]
    )
    assert [(n.content, n.phase) for n in out] == [("a", "commentary"), ("bc", "final_answer")]


def test_keeps_earlier_id_and_extras_win():
    out = run(
        [
            TextNode(content="a", id="first", extra={"k": 1}),
            TextNode(content="b", id="second", extra={"k": 2, "z": 3}),
        ]
    )
    assert len(out) == 1
    assert out[0].id == "first" and out[0].extra == {"k": 1, "z": 3} and out[0].content == "ab"


def test_annotated_text_never_merged():
    out = run(
        [
            TextNode(role="assistant", content="a", extra={"citations": [{"url": "x"}]}),
            TextNode(role="assistant", content="b"),
        ]
    )
    assert shape(out) == [("text", "assistant", "a"), ("text", "assistant", "b")]
    out = run(
        [
            TextNode(role="assistant", content="a"),
            TextNode(role="assistant", content="b", extra={"logprobs": []}),
        ]
    )
    assert len(out) == 2


def test_empty_input_and_validation():
    assert run([]) == []
    assert "config" in validate_rule(
        transform=TYPE_ID, scope="provider", phase="request", models=None, config={"sep": "\n"}
    )
    assert registry.canonical_id("merge_consecutive_roles") == TYPE_ID


def test_separator_joins_separate_messages_readably():
    out = run(
        [TextNode(content="hello"), TextNode(content="benchmark"), TextNode(content="!")],
        {"separator": "\n\n"},
    )
    assert shape(out) == [("text", "user", "hello\n\nbenchmark\n\n!")]


def test_separator_must_be_a_string():
    assert validate_rule(
        transform=TYPE_ID, scope="provider", phase="request", models=None, config={"separator": 1}
    )
    assert not validate_rule(
        transform=TYPE_ID, scope="provider", phase="request", models=None, config={"separator": " "}
    )
