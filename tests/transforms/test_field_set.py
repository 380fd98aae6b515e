"""field_set through the chain engine (reference examples and edge cases)."""

from __future__ import annotations

import pytest

from gateway.urp import ReasoningConfig, Request, Response
from gateway.urp.events import NodeDelta, ResponseDone, ResponseStart
from transforms.base import TransformContext
from transforms.builtin.field_set import FieldSet
from transforms.engine import CompiledRule, StreamChain, run_request, run_response, select
from transforms.registry import registry
from transforms.validation import validate_rule

MODEL = "m"


def run(config: dict, req: Request) -> Request:
    rules = select(
        [(CompiledRule(1, "provider", "request", None, FieldSet(config)),), (), ()], "request", MODEL
    )
    run_request(rules, req, TransformContext(logical_model=MODEL, client_protocol="responses"))
    return req


def req_with(**extra) -> Request:
    return Request(model=MODEL, extra=dict(extra))


PRIORITY_RULE = {"path": "service_tier", "when_equals": "priority", "value": "fast"}


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ({"service_tier": "priority"}, {"service_tier": "fast"}),
        ({"service_tier": "default"}, {"service_tier": "default"}),
        ({"service_tier": "fast"}, {"service_tier": "fast"}),
        ({"service_tier": None}, {"service_tier": None}),
        ({"service_tier": 1}, {"service_tier": 1}),
        ({}, {}),
    ],
)
def test_conditional_write(before, after):
    assert run(PRIORITY_RULE, req_with(**before)).extra == after


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ({}, {}),
        ({"service_tier": "priority"}, {"service_tier": "priority"}),
        ({"service_tier": None}, {"service_tier": "default"}),
    ],
)
def test_when_equals_null_matches_only_an_existing_null(before, after):
    assert (
        run({"path": "service_tier", "when_equals": None, "value": "default"}, req_with(**before)).extra
        == after
    )


def test_true_is_not_one():
    assert run({"path": "x", "when_equals": 1, "value": 2}, req_with(x=True)).extra == {"x": True}
    assert run({"path": "x", "when_equals": 1, "value": 2}, req_with(x=1.0)).extra == {"x": 2}


def test_creates_and_overwrites_intermediates():
    assert run({"path": "a.b.c", "value": 1}, req_with(a=5)).extra == {"a": {"b": {"c": 1}}}
    assert run({"path": "a..b.", "value": None}, req_with(a={"k": 1})).extra == {"a": {"k": 1, "b": None}}


def test_value_is_copied_per_request():
    rule = FieldSet({"path": "metadata", "value": {"tags": ["a"]}})
    rules = [CompiledRule(1, "provider", "request", None, rule)]
    first, second = req_with(), req_with()
    for req in (first, second):
        run_request(rules, req, TransformContext(logical_model=MODEL, client_protocol="responses"))
    first.extra["metadata"]["tags"].append("b")
    assert second.extra["metadata"] == {"tags": ["a"]}


def test_reasoning_paths_use_the_typed_effort_and_reasoning_extras():
    req = run({"path": "reasoning.effort", "value": "high"}, req_with())
    assert req.reasoning.effort == "high" and "reasoning" not in req.extra
    req = Request(model=MODEL, reasoning=ReasoningConfig(effort="low", extra={"effort": "low"}))
    run({"path": "reasoning.effort", "when_equals": "low", "value": "medium"}, req)
    assert req.reasoning.effort == "medium" and "effort" not in req.reasoning.extra
    req = run({"path": "reasoning.summary", "value": "auto"}, req_with())
    assert req.reasoning.extra == {"summary": "auto"} and req.reasoning.effort is None
    req = run({"path": "reasoning.summary", "when_equals": "x", "value": "auto"}, req_with())
    assert req.reasoning is None  # a conditional write creates nothing


def test_response_and_stream_extras():
    rule = CompiledRule(1, "provider", "response", None, FieldSet({"path": "meta.gw", "value": True}))
    resp = Response(id="r", model="m")
    ctx = TransformContext(logical_model=MODEL, client_protocol="responses")
    run_response([rule], resp, ctx)
    assert resp.extra == {"meta": {"gw": True}}
    chain = StreamChain([rule], ctx)
    events = [ResponseStart(id="r", model="m"), NodeDelta(index=0, kind="text", delta="x"), ResponseDone()]
    out = [o for e in events for o in chain.process(e)]
    assert all(e.extra == {"meta": {"gw": True}} for e in out)


def test_validation():
    assert registry["field_set"].scopes == ("provider", "global")

    def errors(config):
        return validate_rule(
            transform="field_set", scope="provider", phase="request", models=None, config=config
        )

    assert errors({"path": "a", "value": None}) == {}
    assert "config" in errors({"path": "a"})
    assert "config" in errors({"path": "", "value": 1})
    assert "config" in errors({"path": "...", "value": 1})
    assert "config" in errors({"path": "_gw_marker", "value": 1})
    assert "config" in errors({"path": "reasoning.effort", "value": "extreme"})
    assert "transform" in validate_rule(
        transform="field_set", scope="api_key", phase="request", models=None, config={"path": "a", "value": 1}
    )
