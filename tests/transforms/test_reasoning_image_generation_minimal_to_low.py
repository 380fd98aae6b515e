"""reasoning_image_generation_minimal_to_low (inferred behaviour, see the module docstring)."""

from gateway.urp import ReasoningConfig, Request, ToolDef
from transforms.base import TransformContext
from transforms.registry import registry

TYPE_ID = "reasoning_image_generation_minimal_to_low"


def run(effort, tools):
    req = Request(model="gpt-5", reasoning=ReasoningConfig(effort=effort), tools=tools)
    registry()[TYPE_ID]().apply_request(
        req, TransformContext(logical_model="gpt-5", client_protocol="responses")
    )
    return req.reasoning.effort


def test_provisional_examples():
    assert run("minimal", [ToolDef(kind="image_generation")]) == "low"
    assert run("minimal", [ToolDef(kind="function", name="f")]) == "minimal"
    assert run("minimal", None) == "minimal"
    assert run("medium", [ToolDef(kind="image_generation")]) == "medium"


def test_tools_untouched():
    tools = [ToolDef(kind="image_generation", extra={"quality": "low"})]
    run("minimal", tools)
    assert tools == [ToolDef(kind="image_generation", extra={"quality": "low"})]
