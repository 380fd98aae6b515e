"""cache_anthropic_tool_use: in an agent's tool loop, a breakpoint on the newest tool result so
the cache point advances with the loop and each turn reads the previous turns from cache."""

from __future__ import annotations

from gateway.urp import Request
from transforms.base import Transform, TransformContext, TransformExample
from transforms.lib.anthropic_cache import (
    LAST_TOOL_RESULT,
    TTL_SCHEMA,
    apply_to_node,
    trailing_tool_result_index,
)


class CacheAnthropicToolUse(Transform):
    """Only when the last input node is a tool result (a tool-result submission turn); the target
    is that node's own block. The request-level marker counts as a used slot; shared ownership
    rules; idempotent. Like cache_anthropic_system, acts only for a Messages upstream."""

    type_id = "cache_anthropic_tool_use"
    category = "cache"
    name = {"en": "Auto-cache: Anthropic tool results", "zh": "自动缓存：Anthropic 工具结果"}
    description = {
        "en": "On a tool-result turn, places an Anthropic cache breakpoint on the newest tool result so a "
        "growing agent loop is read from the prompt cache. Leaves client markers alone and never "
        "uses a fifth breakpoint.",
        "zh": "在提交工具结果的轮次，于最新的工具结果上放置 Anthropic 缓存断点，使不断增长的智能体循环命中提示词缓存。"
        "不修改客户端标记，也不会占用第五个断点。",
    }
    phases = ("request",)
    scopes = ("provider", "api_key")
    config_schema = TTL_SCHEMA
    aliases = ("auto_cache_tool_use",)
    examples = (
        TransformExample(
            title="The trailing tool result gets a breakpoint",
            phase="request",
            protocol="messages",
            input={
                "model": "claude-sonnet-4-5",
                "max_tokens": 64,
                "messages": [
                    {"role": "user", "content": "run again"},
                    {
                        "role": "assistant",
                        "content": [{"type": "tool_use", "id": "call_1", "name": "run", "input": {}}],
                    },
                    {
                        "role": "user",
                        "content": [{"type": "tool_result", "tool_use_id": "call_1", "content": "ok"}],
                    },
                ],
            },
            expected={
                "messages": [
                    {"role": "user", "content": "run again"},
                    {
                        "role": "assistant",
                        "content": [{"type": "tool_use", "id": "call_1", "name": "run", "input": {}}],
                    },
                    {
                        "role": "user",
                        "content": [
                            {
                                "type": "tool_result",
                                "tool_use_id": "call_1",
                                "content": "ok",
                                "cache_control": {"type": "ephemeral"},
                            }
                        ],
                    },
                ]
            },
        ),
        TransformExample(
            title="Not a tool-result turn: unchanged",
            phase="request",
            protocol="messages",
            input={
                "model": "claude-sonnet-4-5",
                "max_tokens": 64,
                "messages": [{"role": "user", "content": "hi"}],
            },
            expected={"messages": [{"role": "user", "content": "hi"}]},
        ),
    )

    def apply_request(self, req: Request, ctx: TransformContext) -> None:
        if ctx.upstream_protocol != "messages":
            return
        index = trailing_tool_result_index(req)
        if index is not None:
            apply_to_node(req, ctx, LAST_TOOL_RESULT, index, self.config["ttl"])
