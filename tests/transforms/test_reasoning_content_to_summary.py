"""reasoning_content_to_summary: content moves to summary, in whole responses and streams."""

from gateway.urp import ReasoningNode
from gateway.urp import events as ev
from gateway.urp.presentation import SUMMARY_AS_THINKING
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

TYPE_ID = "reasoning_content_to_summary"


def one(node):
    return run_whole(registry()[TYPE_ID](), [node])[0]


def test_reference_examples():
    n = one(ReasoningNode(content="plain reasoning"))
    assert (n.content, n.summary, n.extra[SUMMARY_AS_THINKING]) == (None, "plain reasoning", True)
    n = one(
        ReasoningNode(
            content="plain", encrypted="ciphertext", source="openrouter", extra={"preserved": "yes"}
        )
    )
    assert (n.summary, n.encrypted, n.source, n.extra["preserved"]) == (
        "plain",
        "ciphertext",
        "openrouter",
        "yes",
    )
    assert one(ReasoningNode(content="x", summary="old")).summary == "x"
    n = one(ReasoningNode(content="", summary="keep"))
    assert (n.content, n.summary) == (None, "keep")


def test_stream_delta_moved_and_marked():
    out = run_stream(registry()[TYPE_ID](), [ev.NodeDelta(index=7, kind=ev.REASONING_CONTENT, delta="plain")])
    assert (out[0].kind, out[0].delta, out[0].extra) == (
        ev.REASONING_SUMMARY,
        "plain",
        {SUMMARY_AS_THINKING: True},
    )


def test_stream_matches_whole_response():
    nodes = [ReasoningNode(content="think hard", encrypted="e")]
    out = run_stream(registry()[TYPE_ID](), stream_of(nodes, [2, 5]))
    check_lifecycle(out)
    expected = plain(run_whole(registry()[TYPE_ID](), nodes))
    assert plain(accumulated(out)) == expected == plain(terminal(out))


def test_alias():
    assert canonical_id("plaintext_reasoning_to_summary") == TYPE_ID
