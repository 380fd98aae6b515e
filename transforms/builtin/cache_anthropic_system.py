"""cache_anthropic_system: a cache breakpoint on the system prompt, the part of a conversation
that repeats verbatim on every turn."""

from __future__ import annotations

from gateway.urp import Request
from transforms.base import Transform, TransformContext, TransformExample
from transforms.lib.anthropic_cache import SYSTEM, TTL_SCHEMA, apply_to_node, last_system_index


class CacheAnthropicSystem(Transform):
    """Target: the last node whose role is system or developer (text, image, file, provider
    item). The request-level marker counts as a used slot. Shared ownership rules: a client's
    marker is never touched, a marker this attempt wrote may be re-tuned, a fifth breakpoint is
    never inserted. Place it before cache_anthropic_tool_use so the system prefix wins when slots
    run short.

    Difference from the reference: it acts only when the upstream speaks Messages. The reference
    relied on non-Anthropic encoders dropping the marker; this gateway's encoders forward node
    extras (OpenRouter-style relays use them), so acting elsewhere would put ``cache_control`` on
    an OpenAI wire that never asked for it."""

    type_id = "cache_anthropic_system"
    category = "cache"
    name = {"en": "Auto-cache: Anthropic system prompt", "zh": "自动缓存：Anthropic 系统提示词"}
    description = {
        "en": "Places an Anthropic cache breakpoint on the last system/developer block so the system "
        "prompt is read from the prompt cache on later turns. Leaves client markers alone and "
        "never uses a fifth breakpoint.",
        "zh": "在最后一个 system/developer 块上放置 Anthropic 缓存断点，使后续轮次从提示词缓存读取系统提示词。"
        "不修改客户端标记，也不会占用第五个断点。",
    }
    phases = ("request",)
    scopes = ("provider", "api_key")
    config_schema = TTL_SCHEMA
    aliases = ("auto_cache_system",)
    examples = (
        TransformExample(
            title="The system prompt gets a breakpoint",
            phase="request",
            protocol="messages",
            input={
                "model": "claude-sonnet-4-5",
                "max_tokens": 64,
                "system": "S",
                "messages": [{"role": "user", "content": "U"}],
            },
            expected={"system": [{"type": "text", "text": "S", "cache_control": {"type": "ephemeral"}}]},
        ),
        TransformExample(
            title="The last of several system blocks is marked",
            phase="request",
            protocol="messages",
            config={"ttl": "1h"},
            input={
                "model": "claude-sonnet-4-5",
                "max_tokens": 64,
                "system": [{"type": "text", "text": "A"}, {"type": "text", "text": "B"}],
                "messages": [{"role": "user", "content": "U"}],
            },
            expected={
                "system": [
                    {"type": "text", "text": "A"},
                    {"type": "text", "text": "B", "cache_control": {"type": "ephemeral", "ttl": "1h"}},
                ]
            },
        ),
        TransformExample(
            title="A client's marker is left exactly as sent",
            phase="request",
            protocol="messages",
            input={
                "model": "claude-sonnet-4-5",
                "max_tokens": 64,
                "system": [
                    {
                        "type": "text",
                        "text": "S",
                        "cache_control": {"type": "ephemeral", "ttl": "1h", "client_extension": True},
                    }
                ],
                "messages": [{"role": "user", "content": "U"}],
            },
            expected={
                "system": [
                    {
                        "type": "text",
                        "text": "S",
                        "cache_control": {"type": "ephemeral", "ttl": "1h", "client_extension": True},
                    }
                ]
            },
        ),
    )

    def apply_request(self, req: Request, ctx: TransformContext) -> None:
        if ctx.upstream_protocol != "messages":
            return
        index = last_system_index(req)
        if index is not None:
            apply_to_node(req, ctx, SYSTEM, index, self.config["ttl"])
