"""reasoning_effort_to_model_suffix: encode the reasoning effort in the upstream model name, for
providers that publish one model per effort (``qwen3-high``, ``glm-4.6-thinking``...).

The effort must be one of ``none``, ``minimum``, ``low``, ``medium``, ``high``, ``xhigh``, ``max``
(the reference's list: ``minimum``, not ``minimal``, which our decoders never produce, so a
``minimal`` effort is left alone). The first rule whose ``pattern`` glob matches the current
upstream model name (after the provider's redirect) appends its ``suffix`` with every
``{effort}`` replaced by the effort; later rules are ignored. The effort itself is still sent;
billing, logs and model globs keep the client's logical model.

Never in API-key chains: it changes which upstream model (and price) serves the request.
"""

from __future__ import annotations

from gateway.urp import Request
from transforms.base import NOT_FOR_KEYS, Transform, TransformContext, TransformExample
from transforms.globs import glob_match

EFFORTS = frozenset({"none", "minimum", "low", "medium", "high", "xhigh", "max"})


class ReasoningEffortToModelSuffix(Transform):
    type_id = "reasoning_effort_to_model_suffix"
    category = "reasoning"
    name = {"en": "Reasoning: effort to model suffix", "zh": "推理：effort 转模型后缀"}
    description = {
        "en": "Appends a suffix built from the reasoning effort (e.g. -{effort}) to the upstream model name, "
        "for providers with one model per effort.",
        "zh": "按推理 effort 为上游模型名追加后缀（如 -{effort}），适用于每个 effort 对应一个模型的服务商。",
    }
    phases = ("request",)
    scopes = NOT_FOR_KEYS
    config_schema = {
        "type": "object",
        "properties": {
            "rules": {
                "type": "array",
                "minItems": 1,
                "title": "Rules (first match wins)",
                "items": {
                    "type": "object",
                    "properties": {
                        "pattern": {"type": "string", "minLength": 1, "title": "Upstream model glob"},
                        "suffix": {
                            "type": "string",
                            "minLength": 1,
                            "title": "Suffix ({effort} is replaced)",
                        },
                    },
                    "required": ["pattern", "suffix"],
                },
            },
        },
        "required": ["rules"],
    }
    examples = (
        TransformExample(
            title="Effort high selects the -high model",
            phase="request",
            protocol="chat_completion",
            config={"rules": [{"pattern": "qwen*", "suffix": "-{effort}"}]},
            input={
                "model": "qwen3",
                "reasoning_effort": "high",
                "messages": [{"role": "user", "content": "hi"}],
            },
            expected={"model": "qwen3-high", "reasoning_effort": "high"},
        ),
    )

    def setup(self) -> None:
        self.rules: list[tuple[str, str]] = [(r["pattern"], r["suffix"]) for r in self.config["rules"]]

    def apply_request(self, req: Request, ctx: TransformContext) -> None:
        effort = req.reasoning.effort if req.reasoning is not None else None
        if effort not in EFFORTS:
            return
        for pattern, suffix in self.rules:
            if glob_match(pattern, req.model):
                req.model += suffix.replace("{effort}", effort)
                return
