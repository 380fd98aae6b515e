"""field_override_max_tokens through the chain engine."""

from __future__ import annotations

from gateway.urp import Request
from transforms.base import TransformContext
from transforms.builtin.field_override_max_tokens import FieldOverrideMaxTokens
from transforms.engine import CompiledRule, run_request, select
from transforms.validation import validate_rule

MODEL = "m"


def run(config: dict, req: Request) -> Request:
    chain = (CompiledRule(1, "provider", "request", None, FieldOverrideMaxTokens(config)),)
    run_request(
        select([chain, (), ()], "request", MODEL),
        req,
        TransformContext(logical_model=MODEL, client_protocol="messages"),
    )
    return req


def test_replaces_and_creates():
    assert run({"value": 4096}, Request(model=MODEL, max_output_tokens=100000)).max_output_tokens == 4096
    assert run({"value": 4096}, Request(model=MODEL)).max_output_tokens == 4096


def test_validation():
    def errors(config, scope="provider", phase="request"):
        return validate_rule(
            transform="field_override_max_tokens", scope=scope, phase=phase, models=None, config=config
        )

    assert errors({"value": 1}) == {}
    assert "config" in errors({})
    assert "config" in errors({"value": 0})
    assert "config" in errors({"value": "10"})
    assert "transform" in errors({"value": 10}, scope="api_key")
    assert "phase" in errors({"value": 10}, phase="response")
