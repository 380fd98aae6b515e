"""reasoning_summary_heading: headings on summaries, identical in whole responses and streams."""

import pytest

from gateway.urp import ReasoningNode
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

TYPE_ID = "reasoning_summary_heading"


def fmt(summary, **config):
    return run_whole(registry()[TYPE_ID](config), [ReasoningNode(summary=summary)])[0].summary


def test_reference_examples():
    assert fmt("I will check the file.") == "**Thinking**\n\nI will check the file."
    assert (
        fmt("I will check the file.", derive_title=True)
        == "**I will check the file**\n\nI will check the file."
    )
    assert fmt("**Plan**\nstep") == "**Plan**\nstep"
    assert fmt("Use **bold** here") == "**Thinking**\n\nUse **bold** here"
    assert fmt("x", default_title="  My *bold*\ntitle  ") == "**My bold title**\n\nx"
    assert fmt("x", default_title="Hi there", max_title_chars=5) == "**Hi**\n\nx"


def test_empty_summary_content_and_encrypted_untouched():
    node = run_whole(registry()[TYPE_ID]({}), [ReasoningNode(content="c", encrypted="e")])[0]
    assert (node.content, node.summary, node.encrypted) == ("c", None, "e")
    assert fmt("") == ""


def test_idempotent():
    once = fmt("Check.")
    assert fmt(once) == once


def test_config_validation():
    assert "config" in validate_rule(
        transform=TYPE_ID, scope="api_key", phase="response", models=None, config={"max_title_chars": 0}
    )
    assert "config" in validate_rule(
        transform=TYPE_ID, scope="api_key", phase="response", models=None, config={"unknown": 1}
    )
    assert validate_rule(transform=TYPE_ID, scope="api_key", phase="response", models=None, config={}) == {}


def test_stream_injects_summary_before_done_when_none_streamed():
    events = [
        ev.ResponseStart(id="r", model="m"),
        ev.NodeStart(index=0, node=ReasoningNode()),
        ev.NodeDone(index=0, node=ReasoningNode(summary="abc")),
        ev.ResponseDone(output=[ReasoningNode(summary="abc")]),
    ]
    out = run_stream(registry()[TYPE_ID]({}), events)
    check_lifecycle(out)
    assert [(type(e).__name__, getattr(e, "delta", None)) for e in out[1:3]] == [
        ("NodeStart", None),
        ("NodeDelta", "**Thinking**\n\nabc"),
    ]
    assert out[3].node.summary == "**Thinking**\n\nabc"


@pytest.mark.parametrize("config", [{}, {"derive_title": True}, {"derive_title": True, "max_title_chars": 6}])
@pytest.mark.parametrize(
    "summary",
    [
        "I will check the file. Then edit.",
        "**Plan**\nstep",
        "  **Pl**x",
        "Use **b** ok",
        "no end",
        "*",
        "**Plan** \nx",
    ],
)
@pytest.mark.parametrize("cuts", [None, [3], [1, 2, 9]])
def test_stream_matches_whole_response(config, summary, cuts):
    nodes = [ReasoningNode(summary=summary, encrypted="enc")]
    out = run_stream(registry()[TYPE_ID](config), stream_of(nodes, cuts))
    check_lifecycle(out)
    expected = plain(run_whole(registry()[TYPE_ID](config), nodes))
    assert plain(accumulated(out)) == expected
    assert plain(done_nodes(out)) == expected
    assert plain(terminal(out)) == expected
