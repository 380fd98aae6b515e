"""reasoning_effort_to_model_suffix: the effort picks the upstream model name."""

from gateway.urp import ReasoningConfig, Request
from transforms.base import TransformContext
from transforms.registry import registry
from transforms.validation import validate_rule

TYPE_ID = "reasoning_effort_to_model_suffix"
CTX = TransformContext(logical_model="logical", client_protocol="chat_completion")


def run(model, effort, rules):
    req = Request(model=model, reasoning=ReasoningConfig(effort=effort) if effort else None)
    registry()[TYPE_ID]({"rules": rules}).apply_request(req, CTX)
    return req.model, req.reasoning.effort if req.reasoning else None


def test_reference_examples():
    rules = [{"pattern": "qwen*", "suffix": "-{effort}"}]
    assert run("qwen3", "high", rules) == ("qwen3-high", "high")
    assert run("qwen3", None, rules) == ("qwen3", None)
    assert run("qwen3", "low", rules + [{"pattern": "*", "suffix": "-x"}]) == ("qwen3-low", "low")
    assert run("glm", "low", rules) == ("glm", "low")


def test_minimal_is_not_in_the_reference_list():
    assert run("qwen3", "minimal", [{"pattern": "*", "suffix": "-{effort}"}]) == ("qwen3", "minimal")


def test_matches_the_upstream_model_not_the_logical_one():
    assert run("up-model", "high", [{"pattern": "logical", "suffix": "-{effort}"}]) == ("up-model", "high")


def test_validation():
    assert "config" in validate_rule(
        transform=TYPE_ID, scope="provider", phase="request", models=None, config={"rules": []}
    )
    assert "config" in validate_rule(
        transform=TYPE_ID,
        scope="provider",
        phase="request",
        models=None,
        config={"rules": [{"pattern": "", "suffix": "-x"}]},
    )
    errors = validate_rule(
        transform=TYPE_ID,
        scope="api_key",
        phase="request",
        models=None,
        config={"rules": [{"pattern": "*", "suffix": "-x"}]},
    )
    assert any(TYPE_ID in m for m in errors["transform"])
