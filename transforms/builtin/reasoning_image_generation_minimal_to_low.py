"""reasoning_image_generation_minimal_to_low: raise a ``minimal`` reasoning effort to ``low``
when the request offers the image-generation tool.

INFERRED behaviour: the reference catalogue found no source for this id (no code, spec, docs or
test). It is built from the name and a known upstream restriction: OpenAI rejects Responses
requests that combine ``reasoning.effort = "minimal"`` with hosted tools such as image
generation ("The following tools cannot be used with reasoning.effort 'minimal': image_gen").
So: when ``request.tools`` holds a tool of kind ``image_generation`` and the typed effort is
``minimal``, the effort becomes ``low``; anything else is left alone, and tools and input are
never touched. Put it after ``image_enable_openai_generation_tool`` when that rule adds the tool.
Scopes (unknown in the reference) are all three: it only makes a request valid, it changes no
route, price tier or token cap.
"""

from __future__ import annotations

from gateway.urp import Request
from transforms.base import ALL_SCOPES, Transform, TransformContext, TransformExample
from transforms.lib.reasoning_helpers import NO_CONFIG

IMAGE_TOOL = "image_generation"


class ReasoningImageGenerationMinimalToLow(Transform):
    type_id = "reasoning_image_generation_minimal_to_low"
    category = "reasoning"
    name = {"en": "Reasoning: image generation minimal to low", "zh": "推理：图像生成时 minimal 提升为 low"}
    description = {
        "en": "Raises reasoning effort minimal to low when the image-generation tool is offered, since "
        "OpenAI refuses that tool with minimal effort. (Inferred: no reference source.)",
        "zh": "当请求提供图像生成工具时，将推理 effort 从 minimal 提升为 low，因为 OpenAI 不允许该工具与 minimal "
        "一起使用。（推断实现：参考实现中无源码。）",
    }
    phases = ("request",)
    scopes = ALL_SCOPES
    config_schema = NO_CONFIG
    examples = (
        TransformExample(
            title="Minimal effort with the image tool becomes low",
            phase="request",
            protocol="responses",
            input={
                "model": "gpt-5",
                "input": "draw a cat",
                "reasoning": {"effort": "minimal"},
                "tools": [{"type": "image_generation"}],
            },
            expected={"reasoning": {"effort": "low"}},
        ),
    )

    def apply_request(self, req: Request, ctx: TransformContext) -> None:
        r = req.reasoning
        if r is None or r.effort != "minimal" or not req.tools:
            return
        if any(tool.kind == IMAGE_TOOL for tool in req.tools):
            r.effort = "low"
