"""``field_strip_sampling``: clear typed sampling/controls fields the upstream rejects.

``field_set``/``field_remove`` only reach passthrough fields, while these typed fields are always
emitted by the encoders; this transform sets each listed one to absent. Absent fields are fine,
the operation is idempotent, and model, input, stream, tools, tool choice, reasoning and extras
are never touched. Duplicate entries are harmless and accepted.
"""

from __future__ import annotations

from gateway.urp import Request
from transforms.base import ALL_SCOPES, Transform, TransformContext, TransformExample

STRIPPABLE = (
    "temperature",
    "top_p",
    "stop",
    "verbosity",
    "parallel_tool_calls",
    "max_output_tokens",
    "response_format",
    "user",
)


class FieldStripSampling(Transform):
    type_id = "field_strip_sampling"
    category = "field"
    name = {"en": "Field: strip sampling parameters", "zh": "字段：移除采样参数"}
    description = {
        "en": "Remove typed request fields such as temperature or top_p before the request is sent upstream.",
        "zh": "在发送到上游之前移除 temperature、top_p 等类型化请求字段。",
    }
    phases = ("request",)
    scopes = ALL_SCOPES
    config_schema = {
        "type": "object",
        "properties": {
            "fields": {
                "type": "array",
                "title": "Fields",
                "minItems": 1,
                "items": {"type": "string", "enum": list(STRIPPABLE)},
                "default": ["temperature", "top_p"],
            },
        },
        "required": ["fields"],
        "additionalProperties": False,
    }

    examples = (
        TransformExample(
            title="temperature is dropped, top_p kept",
            phase="request",
            config={"fields": ["temperature"]},
            input={
                "model": "gpt-4o",
                "messages": [{"role": "user", "content": "hi"}],
                "temperature": 0.0,
                "top_p": 0.9,
            },
            expected={"top_p": 0.9},
            absent=("temperature",),
        ),
    )

    def setup(self) -> None:
        self.fields = tuple(dict.fromkeys(f for f in self.config.get("fields", ()) if f in STRIPPABLE))

    def apply_request(self, req: Request, ctx: TransformContext) -> None:
        for name in self.fields:
            setattr(req, name, None)
