"""The example plug-in: config validation, what it redacts and what it leaves alone, and that the
gateway registered it from its entry point. Run from the repository root (the gateway's Django
settings apply): ``pytest examples/monogate-redact/tests``."""

from __future__ import annotations

import pytest
from monogate_redact import RedactPatterns

from gateway.urp import ImageNode, MediaSource, Request, TextNode, ToolResultNode
from transforms.base import TransformContext
from transforms.checks import check_transform
from transforms.examples import check_example
from transforms.registry import registry


def run(config, nodes):
    req = Request(model="m", input=nodes)
    ctx = TransformContext(logical_model="m", client_protocol="chat_completion")
    RedactPatterns(config).apply_request(req, ctx)
    return req, ctx


def test_registered_from_the_entry_point():
    assert registry["redact_patterns"] is RedactPatterns
    assert registry.origin("redact_patterns") == (
        "monogate-redact 0.1.0 (monogate_redact.transform:RedactPatterns)"
    )
    assert check_transform(RedactPatterns) == []


@pytest.mark.parametrize("example", RedactPatterns.examples, ids=lambda e: e.title)
def test_worked_examples(example):
    assert check_example(RedactPatterns, example) == []


def test_only_configured_roles_and_only_text():
    image = ImageNode(role="user", source=MediaSource(kind="url", url="https://x/4111111111111111.png"))
    result = ToolResultNode(call_id="c1", content="4111111111111111")
    req, ctx = run(
        {"patterns": [r"\d{16}"], "roles": ["user", "assistant"]},
        [
            TextNode(role="system", content="s 4111111111111111"),
            TextNode(role="user", content="u 4111111111111111 and 5500000000000004"),
            TextNode(role="assistant", content="a 4111111111111111"),
            image,
            result,
        ],
    )
    assert [n.content for n in req.input[:3]] == [
        "s 4111111111111111",
        "u [REDACTED] and [REDACTED]",
        "a [REDACTED]",
    ]
    assert req.input[3] is image and image.source.url.endswith("4111111111111111.png")
    assert req.input[4] is result and result.content == "4111111111111111"
    assert ctx.shared["redact_patterns"] == 3


def test_replacement_is_literal_and_patterns_do_not_redact_each_other():
    req, _ = run(
        {"patterns": [r"(secret)", r"\[gone\]"], "replacement": r"[gone]\1"},
        [TextNode(content="a secret here")],
    )
    assert req.input[0].content == r"a [gone]\1 here"


def test_no_match_changes_nothing():
    req, ctx = run({"patterns": ["zzz"]}, [TextNode(content="hello")])
    assert req.input[0].content == "hello" and "redact_patterns" not in ctx.shared


@pytest.mark.parametrize(
    ("config", "path", "fragment"),
    [
        ({}, "", "'patterns' is a required property"),
        ({"patterns": []}, "patterns", "should be non-empty"),
        ({"patterns": ["("]}, "patterns.0", "Not a valid regular expression"),
        ({"patterns": ["ok", "a*"]}, "patterns.1", "matches empty text"),
        ({"patterns": ["x"], "roles": ["tool"]}, "roles.0", "is not one of"),
        ({"patterns": ["x"], "extra": 1}, "", "Additional properties"),
    ],
)
def test_config_refused_on_save(config, path, fragment):
    errors = RedactPatterns.validate_config(config)
    assert any(p == path and fragment in m for p, m in errors), errors


@pytest.mark.django_db
def test_loadconfig_and_dumpconfig_treat_it_like_a_builtin():
    from gateway.configfile import ConfigError, dump, load

    rule = {"transform": "redact_patterns", "phase": "request", "config": {"patterns": [r"\d{16}"]}}
    load({"global_transforms": [rule]})
    assert dump()["global_transforms"] == [rule]
    with pytest.raises(ConfigError) as exc:
        load({"global_transforms": [{"transform": "redact_patterns", "config": {"patterns": ["("]}}]})
    assert "global_transforms[0].config" in str(exc.value) and "Not a valid regular expression" in str(
        exc.value
    )
