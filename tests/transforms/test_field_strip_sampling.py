"""field_strip_sampling through the chain engine."""

from __future__ import annotations

from gateway.urp import Request, ResponseFormat, ToolDef
from transforms.base import TransformContext
from transforms.builtin.field_strip_sampling import FieldStripSampling
from transforms.engine import CompiledRule, run_request, select
from transforms.validation import validate_rule

MODEL = "m"


def run(config: dict, req: Request) -> Request:
    chain = (CompiledRule(1, "api_key", "request", None, FieldStripSampling(config)),)
    run_request(
        select([(), (), chain], "request", MODEL),
        req,
        TransformContext(logical_model=MODEL, client_protocol="chat_completion"),
    )
    return req


def test_strips_only_listed_fields():
    req = run({"fields": ["temperature"]}, Request(model=MODEL, temperature=0.0, top_p=0.9))
    assert req.temperature is None and req.top_p == 0.9


def test_strips_everything_listed_and_nothing_else():
    tools = [ToolDef(kind="function", name="f")]
    req = Request(
        model=MODEL,
        temperature=1.0,
        top_p=0.5,
        stop=["x"],
        verbosity="low",
        parallel_tool_calls=False,
        max_output_tokens=10,
        response_format=ResponseFormat(type="json_object"),
        user="u",
        stream=True,
        tools=tools,
        tool_choice="auto",
        extra={"temperature": 3},
    )
    run(
        {
            "fields": [
                "temperature",
                "top_p",
                "stop",
                "verbosity",
                "parallel_tool_calls",
                "max_output_tokens",
                "response_format",
                "user",
                "user",
            ]
        },
        req,
    )
    assert (
        req.temperature,
        req.top_p,
        req.stop,
        req.verbosity,
        req.parallel_tool_calls,
        req.max_output_tokens,
        req.response_format,
        req.user,
    ) == (None,) * 8
    assert (
        req.stream is True
        and req.tools == tools
        and req.tool_choice == "auto"
        and req.extra == {"temperature": 3}
    )
    run({"fields": ["temperature"]}, req)  # idempotent on absent fields
    assert req.temperature is None


def test_validation():
    def errors(config):
        return validate_rule(
            transform="field_strip_sampling", scope="api_key", phase="request", models=None, config=config
        )

    assert errors({"fields": ["temperature"]}) == {}
    for bad in ({"fields": []}, {"fields": ["model"]}, {}, {"fields": ["temperature"], "extra": 1}):
        assert "config" in errors(bad), bad
