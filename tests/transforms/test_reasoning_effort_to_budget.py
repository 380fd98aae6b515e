"""reasoning_effort_to_budget: effort -> thinking.budget_tokens in the upstream body."""

import pytest

from gateway.protocols import codec
from gateway.protocols.base import EncodeContext
from transforms.base import TransformContext
from transforms.registry import registry
from transforms.validation import validate_rule

TYPE_ID = "reasoning_effort_to_budget"
CONFIG = {"low": 1024, "med": 4096, "high": 16384}


def upstream_body(client, body, upstream, config=CONFIG):
    req = codec(client).decode_request(body)
    rule = registry()[TYPE_ID](config)
    rule.apply_request(
        req, TransformContext(logical_model="m", client_protocol=client, upstream_protocol=upstream)
    )
    return codec(upstream).encode_request(req, EncodeContext(model=body["model"], source_protocol=client))


def chat(effort, **extra):
    return {
        "model": "qwen3",
        "reasoning_effort": effort,
        "messages": [{"role": "user", "content": "hi"}],
        **extra,
    }


@pytest.mark.parametrize(
    ("effort", "budget"), [("low", 1024), ("medium", 4096), ("high", 16384), ("xhigh", 16384), ("max", 16384)]
)
def test_mapping_with_fallbacks(effort, budget):
    assert upstream_body("chat_completion", chat(effort), "chat_completion")["thinking"] == {
        "budget_tokens": budget
    }


def test_xhigh_and_max_configured():
    config = {**CONFIG, "xhigh": 20000, "max": 30000}
    assert (
        upstream_body("chat_completion", chat("xhigh"), "chat_completion", config)["thinking"][
            "budget_tokens"
        ]
        == 20000
    )
    assert (
        upstream_body("chat_completion", chat("max"), "chat_completion", config)["thinking"]["budget_tokens"]
        == 30000
    )
    config = {**CONFIG, "xhigh": 20000}
    assert (
        upstream_body("chat_completion", chat("max"), "chat_completion", config)["thinking"]["budget_tokens"]
        == 20000
    )


@pytest.mark.parametrize("effort", ["minimal", "none"])
def test_other_efforts_no_op(effort):
    assert "thinking" not in upstream_body("chat_completion", chat(effort), "chat_completion")


def test_existing_thinking_object_kept():
    body = upstream_body("chat_completion", chat("medium", thinking={"type": "enabled"}), "chat_completion")
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 4096}
    assert body["reasoning_effort"] == "medium"


def test_messages_upstream_gets_the_budget():
    body = upstream_body(
        "responses",
        {
            "model": "claude-sonnet-4",
            "input": "hi",
            "reasoning": {"effort": "medium"},
            "max_output_tokens": 8000,
        },
        "messages",
    )
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 4096}


def test_never_in_api_key_chains_and_config_validated():
    errors = validate_rule(transform=TYPE_ID, scope="api_key", phase="request", models=None, config=CONFIG)
    assert any(TYPE_ID in m for m in errors["transform"])
    assert (
        validate_rule(transform=TYPE_ID, scope="provider", phase="request", models=None, config=CONFIG) == {}
    )
    assert validate_rule(transform=TYPE_ID, scope="global", phase="request", models=None, config=CONFIG) == {}
    assert "config" in validate_rule(
        transform=TYPE_ID, scope="provider", phase="request", models=None, config={"low": 1}
    )
    assert "config" in validate_rule(
        transform=TYPE_ID, scope="provider", phase="request", models=None, config={**CONFIG, "low": -1}
    )
