"""reasoning_strip_config: remove the request's reasoning controls, for upstreams that reject
carried thinking configuration (e.g. "requires adaptive thinking") and should get a plain
non-thinking request."""

from __future__ import annotations

from gateway.protocols.messages.common import RAW_OUTPUT_CONFIG
from gateway.urp import Request
from transforms.base import Transform, TransformContext, TransformExample
from transforms.lib.reasoning_helpers import NO_OPTIONS


class ReasoningStripConfig(Transform):
    """Sets ``request.reasoning`` to absent: effort, budget, summary, mode and the native control
    objects all go, and so does the effort of a Messages client's ``output_config`` (the rest of
    that object, e.g. a response format, stays). Input nodes (replayed reasoning included), tools
    and sampling stay."""

    type_id = "reasoning_strip_config"
    category = "reasoning"
    name = {"en": "Reasoning: strip request config", "zh": "推理：移除请求中的推理配置"}
    description = {
        "en": "Removes the reasoning/thinking configuration (effort, budget, summary) from requests, so the "
        "upstream gets a plain non-thinking request.",
        "zh": "移除请求中的推理/思考配置（effort、预算、摘要），使上游收到普通的非思考请求。",
    }
    phases = ("request",)
    config_schema = NO_OPTIONS
    examples = (
        TransformExample(
            title="The reasoning object disappears",
            phase="request",
            protocol="responses",
            input={"model": "o3", "input": "hi", "reasoning": {"effort": "low", "summary": "auto"}},
            expected={"model": "o3", "input": "hi"},
        ),
    )

    def apply_request(self, req: Request, ctx: TransformContext) -> None:
        req.reasoning = None
        output_config = req.extra.get(RAW_OUTPUT_CONFIG)
        if isinstance(output_config, dict) and "effort" in output_config:
            req.extra[RAW_OUTPUT_CONFIG] = {k: v for k, v in output_config.items() if k != "effort"}
