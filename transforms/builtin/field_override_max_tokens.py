"""``field_override_max_tokens``: force the output-token ceiling.

Sets the typed ``max_output_tokens`` unconditionally (replacing the client's value or creating
it); each encoder maps it to its protocol's field (``max_tokens``, ``max_completion_tokens``,
``max_output_tokens``, ``generationConfig.maxOutputTokens``). Not offered for API keys: it
drives cost. The reference parser accepted 0; the schema's minimum of 1 is enforced here.
"""

from __future__ import annotations

from gateway.urp import Request
from transforms.base import NOT_FOR_KEYS, Transform, TransformContext, TransformExample


class FieldOverrideMaxTokens(Transform):
    type_id = "field_override_max_tokens"
    aliases = ("override_max_tokens",)
    category = "field"
    name = {"en": "Field: override max tokens", "zh": "字段：覆盖最大 token 数"}
    description = {
        "en": "Replace the request's maximum output tokens with a fixed value.",
        "zh": "将请求的最大输出 token 数替换为固定值。",
    }
    phases = ("request",)
    scopes = NOT_FOR_KEYS
    config_schema = {
        "type": "object",
        "properties": {
            "value": {"type": "integer", "minimum": 1, "title": "Max output tokens"},
        },
        "required": ["value"],
    }

    examples = (
        TransformExample(
            title="The client's token cap is replaced",
            phase="request",
            config={"value": 4096},
            input={"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 100000},
            expected={"max_tokens": 4096},
        ),
        TransformExample(
            title="A request without a cap gets one",
            phase="request",
            config={"value": 4096},
            input={"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]},
            expected={"max_completion_tokens": 4096},
        ),
    )

    def setup(self) -> None:
        self.value = int(self.config["value"]) if "value" in self.config else None

    def apply_request(self, req: Request, ctx: TransformContext) -> None:
        if self.value is not None:
            req.max_output_tokens = self.value
