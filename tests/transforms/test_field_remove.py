"""field_remove through the chain engine."""

from __future__ import annotations

from gateway.urp import ReasoningConfig, Request, Response
from gateway.urp.events import NodeDelta, ProviderControl, ResponseDone
from transforms.base import TransformContext
from transforms.builtin.field_remove import FieldRemove
from transforms.engine import CompiledRule, StreamChain, run_request, run_response, select
from transforms.validation import validate_rule

MODEL = "m"
CTX = TransformContext(logical_model=MODEL, client_protocol="chat_completion")


def run(path: str, req: Request) -> Request:
    rules = select(
        [(CompiledRule(1, "provider", "request", None, FieldRemove({"path": path})),), (), ()],
        "request",
        MODEL,
    )
    run_request(rules, req, CTX)
    return req


def test_removes_nested_key_and_keeps_empty_parents():
    req = run("metadata.trace", Request(model=MODEL, extra={"metadata": {"trace": 1, "a": 2}}))
    assert req.extra == {"metadata": {"a": 2}}
    req = run("metadata.trace", Request(model=MODEL, extra={"metadata": {"trace": 1}}))
    assert req.extra == {"metadata": {}}


def test_missing_or_non_object_intermediate_is_a_no_op():
    assert run("x.y", Request(model=MODEL, extra={"x": "str"})).extra == {"x": "str"}
    assert run("q.r", Request(model=MODEL, extra={"x": 1})).extra == {"x": 1}


def test_typed_fields_are_not_reachable_but_reasoning_is():
    req = run("temperature", Request(model=MODEL, temperature=0.5))
    assert req.temperature == 0.5
    req = run(
        "reasoning.effort",
        Request(model=MODEL, reasoning=ReasoningConfig(effort="high", extra={"summary": "a"})),
    )
    assert req.reasoning.effort is None and req.reasoning.extra == {"summary": "a"}
    req = run(
        "reasoning.summary",
        Request(model=MODEL, reasoning=ReasoningConfig(effort="high", extra={"summary": "a"})),
    )
    assert req.reasoning.effort == "high" and req.reasoning.extra == {}
    assert run("reasoning", Request(model=MODEL, reasoning=ReasoningConfig(effort="low"))).reasoning is None


def test_response_and_every_stream_event():
    rule = CompiledRule(1, "provider", "response", None, FieldRemove({"path": "trace"}))
    resp = Response(id="r", model="m", extra={"trace": 1, "keep": 2})
    run_response([rule], resp, CTX)
    assert resp.extra == {"keep": 2}
    chain = StreamChain([rule], CTX)
    events = [
        NodeDelta(index=0, kind="text", delta="x", extra={"trace": 1}),
        ProviderControl(protocol="messages", event_name="ping"),
        ResponseDone(extra={"trace": 2, "keep": 1}),
    ]
    out = [o for e in events for o in chain.process(e)]
    assert out[0].extra == {} and out[2].extra == {"keep": 1} and out[1] is events[1]


def test_validation():
    def errors(config, scope="provider"):
        return validate_rule(
            transform="field_remove", scope=scope, phase="response", models=None, config=config
        )

    assert errors({"path": "a.b"}) == {}
    assert "config" in errors({"path": ""})
    assert "config" in errors({})
    assert "transform" in errors({"path": "a"}, scope="api_key")
