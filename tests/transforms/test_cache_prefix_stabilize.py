"""cache_prefix_stabilize: volatile lines of the system prefix (reference 3.1)."""

import pytest

from gateway.urp import ImageNode, MediaSource, Request, TextNode
from transforms.base import TransformContext
from transforms.engine import CompiledRule, run_request, select
from transforms.registry import registry
from transforms.validation import validate_rule

TYPE_ID = "cache_prefix_stabilize"
ENV = (
    "You are a coding agent.\n<env>\nWorking directory: /srv/app\nToday's date: 2026-09-10\n</env>\n## Rules\n"
    "Prefer the existing convention."
)


def apply(nodes, config=None, upstream="chat_completion"):
    req = Request(model="m", input=nodes)
    c = TransformContext(logical_model="m", client_protocol="chat_completion", upstream_protocol=upstream)
    rule = CompiledRule(1, "global", "request", None, registry()[TYPE_ID](config or {}))
    run_request(select([(), (rule,), ()], "request", "m"), req, c)
    return [(n.role, getattr(n, "content", None)) for n in req.input]


def test_relocates_env_block_same_length_and_idempotent():
    out = apply([TextNode(role="system", content=ENV)])
    expected = (
        "You are a coding agent.\n## Rules\nPrefer the existing convention.\n<env>\nWorking directory: "
        "/srv/app\nToday's date: 2026-09-10\n</env>"
    )
    assert out == [("system", expected)] and len(expected) == len(ENV)
    assert apply([TextNode(role="system", content=expected)]) == [("system", expected)]


def test_strip_removes_block_and_empty_node():
    out = apply(
        [
            TextNode(role="system", content="<user_info>\nWorkspace Path: /w\n</user_info>"),
            TextNode(role="system", content="Stable instructions."),
            TextNode(role="user", content="hi"),
        ],
        {"action": "strip"},
    )
    assert out == [("system", "Stable instructions."), ("user", "hi")]


def test_lines_from_several_nodes_go_to_the_last_prefix_text():
    out = apply(
        [
            TextNode(role="system", content="First.\nx-anthropic-billing-header: cch=a1;"),
            TextNode(role="developer", content="<timestamp>\nnow\n</timestamp>\nSecond."),
            TextNode(role="user", content="go"),
        ]
    )
    assert out == [
        ("system", "First."),
        ("developer", "Second.\nx-anthropic-billing-header: cch=a1;\n<timestamp>\nnow\n</timestamp>"),
        ("user", "go"),
    ]


def test_unclosed_block_never_swallows_the_prompt():
    text = "Intro\n<env>\nWorking directory: /w\nRules follow"
    assert apply([TextNode(role="system", content=text)]) == [("system", text)]


def test_messages_upstream_and_after_prefix_untouched():
    assert apply([TextNode(role="system", content=ENV)], upstream="messages") == [("system", ENV)]
    user = "<env>\nx\n</env>\nq"
    assert apply([TextNode(role="system", content="S"), TextNode(role="user", content=user)]) == [
        ("system", "S"),
        ("user", user),
    ]


def test_indented_markers_and_custom_lists_replace_builtins():
    text = "A\n  <ctx>\n  x\n  </ctx>\nB\n<env>\ny\n</env>"
    out = apply(
        [TextNode(role="system", content=text)],
        {"blocks": [{"open": "<ctx>", "close": "</ctx>"}], "line_prefixes": []},
    )
    assert out == [("system", "A\nB\n<env>\ny\n</env>\n  <ctx>\n  x\n  </ctx>")]


def test_empty_lists_disable():
    assert apply([TextNode(role="system", content=ENV)], {"blocks": [], "line_prefixes": []}) == [
        ("system", ENV)
    ]


def test_non_text_prefix_nodes_skipped_and_empty_prefix_text_removed_when_acting():
    img = ImageNode(role="system", source=MediaSource(kind="url", url="https://x/i.png"))
    out = apply(
        [
            TextNode(role="system", content=""),
            img,
            TextNode(role="system", content="x-anthropic-billing-header: 1\nS"),
        ],
        {"action": "strip"},
    )
    assert out == [("system", None), ("system", "S")]


@pytest.mark.parametrize(
    "config",
    [
        {"blocks": [{"open": "  ", "close": "x"}]},
        {"blocks": [{"open": "a"}]},
        {"blocks": [{"open": "a", "close": "b", "x": 1}]},
        {"line_prefixes": [""]},
        {"line_prefixes": [" \t"]},
        {"action": "move"},
        {"other": 1},
    ],
)
def test_bad_configs(config):
    assert validate_rule(transform=TYPE_ID, scope="global", phase="request", models=None, config=config)
