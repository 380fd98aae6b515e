"""cache_openai_prompt: stable prompt_cache_key and retention (reference 3.1)."""

import re

import pytest

from gateway.protocols import codec
from gateway.protocols.base import EncodeContext
from gateway.urp import Request, ResponseFormat, TextNode, ToolCallNode, ToolDef
from transforms.base import TransformContext
from transforms.engine import CompiledRule, run_request, select
from transforms.lib.cache_keys import canonical_json, xxh3_128_hex
from transforms.registry import canonical_id, registry
from transforms.validation import validate_rule

TYPE_ID = "cache_openai_prompt"
SYSTEM = "You are a coding assistant."


def apply(req, config=None, upstream="responses", username=None, key_id=None):
    c = TransformContext(
        logical_model="m",
        client_protocol="responses",
        upstream_protocol=upstream,
        username=username,
        api_key_id=key_id,
    )
    rule = CompiledRule(1, "global", "request", None, registry()[TYPE_ID](config or {}))
    run_request(select([(), (rule,), ()], "request", "m"), req, c)
    return req.extra


def conv(user_text, model="gpt-5.5", system=SYSTEM, **kw):
    return Request(
        model=model,
        input=[TextNode(role="system", content=system), TextNode(role="user", content=user_text)],
        **kw,
    )


def test_same_prefix_same_key_and_default_retention():
    a, b = apply(conv("fix bug 1")), apply(conv("write docs"))
    assert a["prompt_cache_key"] == b["prompt_cache_key"]
    assert re.fullmatch(r"mzpc_[0-9a-f]{32}", a["prompt_cache_key"])
    assert a["prompt_cache_retention"] == "24h"


def test_key_is_the_documented_digest():
    key = apply(conv("x"))["prompt_cache_key"]
    material = {
        "model": "gpt-5.5",
        "prefix_nodes": [
            {"type": "text", "id": None, "extra": {}, "role": "system", "content": SYSTEM, "phase": None}
        ],
    }
    assert key == "mzpc_" + xxh3_128_hex(material)
    assert canonical_json({"b": 1, "a": "é"}) == '{"a":"é","b":1}'.encode()


def test_prefix_changes_key_and_model_changes_key():
    base = apply(conv("x"))["prompt_cache_key"]
    assert apply(conv("x", system="Other."))["prompt_cache_key"] != base
    assert apply(conv("x", model="gpt-5.6"))["prompt_cache_key"] != base


def test_tools_and_response_format_are_part_of_the_key():
    base = apply(conv("x"))["prompt_cache_key"]
    with_tools = apply(conv("x", tools=[ToolDef(kind="function", name="f", parameters={"type": "object"})]))
    with_rf = apply(conv("x", response_format=ResponseFormat(type="json_object")))
    assert len({base, with_tools["prompt_cache_key"], with_rf["prompt_cache_key"]}) == 3


def test_full_input_mode_differs_per_input():
    cfg = {"include_full_input_in_key": True}
    a = apply(conv("one"), cfg, upstream="chat_completion")
    b = apply(conv("two"), cfg, upstream="chat_completion")
    assert a["prompt_cache_key"] != b["prompt_cache_key"]


def test_prefix_stops_at_first_non_system_node():
    a = Request(
        model="m",
        input=[
            TextNode(role="system", content="S"),
            ToolCallNode(call_id="1", name="f"),
            TextNode(role="system", content="late 1"),
        ],
    )
    b = Request(
        model="m",
        input=[
            TextNode(role="system", content="S"),
            ToolCallNode(call_id="1", name="f"),
            TextNode(role="system", content="late 2"),
        ],
    )
    assert apply(a)["prompt_cache_key"] == apply(b)["prompt_cache_key"]


def test_messages_upstream_adds_nothing():
    assert apply(conv("x"), upstream="messages") == {}


def test_identity_mode():
    cfg = {"key_mode": "identity"}
    a = apply(conv("x", model="gpt-4o"), cfg, username="alice", key_id=7)["prompt_cache_key"]
    b = apply(conv("y", model="gpt-5.5", system="S2"), cfg, username="alice", key_id=7)["prompt_cache_key"]
    c = apply(conv("x"), cfg, username="alice", key_id=8)["prompt_cache_key"]
    assert a == b != c
    assert a == "mzpc_" + xxh3_128_hex({"username": "alice", "api_key_id": "7"})


def test_user_in_key():
    cfg = {"include_user_in_key": True}
    a = apply(conv("x", user="u1"), cfg)["prompt_cache_key"]
    b = apply(conv("x", user="u2"), cfg)["prompt_cache_key"]
    c = apply(conv("x"), cfg, username="alice")["prompt_cache_key"]
    d = apply(conv("x"), cfg, username="bob")["prompt_cache_key"]
    assert len({a, b, c, d}) == 4


def test_client_key_and_retention_never_overwritten():
    req = conv("x", extra={"prompt_cache_key": "mine"})
    assert apply(req, {"retention": "in_memory"}) == {
        "prompt_cache_key": "mine",
        "prompt_cache_retention": "in_memory",
    }
    req = conv("x", extra={"prompt_cache_key": {"odd": 1}, "prompt_cache_retention": "24h"})
    assert apply(req, {"retention": "in_memory", "key_prefix": "k"}) == {
        "prompt_cache_key": {"odd": 1},
        "prompt_cache_retention": "24h",
    }


def test_custom_prefix_idempotent_and_untouched_fields():
    req = conv("x", user="u")
    first = dict(apply(req, {"key_prefix": "team"}))
    assert first["prompt_cache_key"].startswith("team_")
    assert apply(req, {"key_prefix": "team"}) == first
    assert req.user == "u" and req.model == "gpt-5.5" and len(req.input) == 2


def test_on_the_chat_wire():
    req = conv("x")
    apply(req, upstream="chat_completion")
    body = codec("chat_completion").encode_request(
        req, EncodeContext(model="gpt-5.5", source_protocol="responses", strip_nested=True)
    )
    assert body["prompt_cache_key"].startswith("mzpc_") and body["prompt_cache_retention"] == "24h"


@pytest.mark.parametrize(
    "config",
    [
        {"retention": "1d"},
        {"key_prefix": ""},
        {"key_mode": "x"},
        {"include_user_in_key": "yes"},
        {"unknown": 1},
    ],
)
def test_bad_configs(config):
    assert validate_rule(transform=TYPE_ID, scope="global", phase="request", models=None, config=config)


@pytest.mark.parametrize(
    "alias",
    ["auto_cache_openai", "auto_cache_openai_prompt", "auto_cache_openai_prompt_key", "openai_prompt_cache"],
)
def test_aliases(alias):
    assert canonical_id(alias) == TYPE_ID


def test_lines_relocated_by_prefix_stabilize_do_not_change_the_key():
    def run_both(day):
        req = Request(
            model="gpt-5.5",
            input=[
                TextNode(role="system", content=f"<env>\nToday's date: 2026-09-{day}\n</env>\nStable rules."),
                TextNode(role="user", content="x"),
            ],
        )
        c = TransformContext(
            logical_model="m", client_protocol="chat_completion", upstream_protocol="chat_completion"
        )
        rules = tuple(
            CompiledRule(i, "global", "request", None, registry()[t]({}))
            for i, t in enumerate(["cache_prefix_stabilize", TYPE_ID])
        )
        run_request(select([(), rules, ()], "request", "m"), req, c)
        return req.extra["prompt_cache_key"], req.input[0].content

    (k1, c1), (k2, c2) = run_both("01"), run_both("02")
    assert k1 == k2 and c1 != c2 and c1.startswith("Stable rules.\n<env>")
    assert k1 == apply(conv("y", system="Stable rules."), upstream="chat_completion")["prompt_cache_key"]
