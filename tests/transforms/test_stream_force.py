"""stream_force through the chain engine."""

import pytest

from gateway.urp import Request, TextNode
from transforms.base import TransformContext
from transforms.engine import CompiledRule, run_request, select
from transforms.registry import registry
from transforms.validation import validate_rule

TYPE_ID = "stream_force"


def run(config, stream):
    cls = registry[TYPE_ID]
    assert cls.validate_config(config) == []
    rule = CompiledRule(1, "provider", "request", None, cls(config))
    nodes = [TextNode(content="hi")]
    req = Request(model="m", input=nodes, stream=stream, tool_choice="auto")
    run_request(
        select([(rule,), (), ()], "request", "m"),
        req,
        TransformContext(logical_model="m", client_protocol="chat_completion", stream=bool(stream)),
    )
    assert req.input == nodes and req.tool_choice == "auto"
    return req.stream


@pytest.mark.parametrize(
    ("enabled", "stream", "expected"),
    [(True, False, True), (False, True, False), (True, None, True), (False, None, False)],
)
def test_sets_upstream_stream(enabled, stream, expected):
    assert run({"enabled": enabled}, stream) is expected


def test_empty_config_is_invalid():
    errors = validate_rule(transform=TYPE_ID, scope="provider", phase="request", models=None, config={})
    assert any("enabled" in m for m in errors["config"])
    errors = validate_rule(
        transform=TYPE_ID, scope="provider", phase="request", models=None, config={"enabled": "yes"}
    )
    assert errors["config"][0].startswith("enabled:")


def test_not_allowed_for_api_keys():
    errors = validate_rule(
        transform=TYPE_ID, scope="api_key", phase="request", models=None, config={"enabled": True}
    )
    assert "transform" in errors
    assert (
        validate_rule(
            transform=TYPE_ID, scope="global", phase="request", models=None, config={"enabled": True}
        )
        == {}
    )
    assert registry.canonical_id("force_stream") == TYPE_ID
