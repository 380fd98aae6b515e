"""cache_anthropic_auto: Anthropic's request-level automatic caching (the request-level
``cache_control``), so the cache point follows the last cacheable block without the client
placing markers."""

from __future__ import annotations

from gateway.urp import Request
from transforms.base import Transform, TransformContext, TransformExample
from transforms.lib.anthropic_cache import TTL_SCHEMA, apply_to_request


class CacheAnthropicAuto(Transform):
    """Only for a Messages upstream. Target: the request-level ``cache_control``; the slot test
    counts only input nodes carrying a marker (the target itself is not a node). A client's
    request-level marker is left alone; one this attempt wrote may be re-tuned by a later rule
    (e.g. the key chain changing the provider chain's TTL) without taking another slot."""

    type_id = "cache_anthropic_auto"
    category = "cache"
    name = {"en": "Auto-cache: Anthropic request", "zh": "自动缓存：Anthropic 请求级"}
    description = {
        "en": "Turns on Anthropic's request-level automatic prompt caching (a top-level cache_control) "
        "when the upstream speaks the Messages protocol. Never uses a fifth breakpoint and never "
        "changes a marker the client sent.",
        "zh": "当上游使用 Messages 协议时，开启 Anthropic 请求级自动提示词缓存（顶层 cache_control）。"
        "不会占用第五个断点，也不会修改客户端自带的标记。",
    }
    phases = ("request",)
    scopes = ("provider", "api_key")
    config_schema = TTL_SCHEMA
    examples = (
        TransformExample(
            title="A Messages request gets the request-level marker",
            phase="request",
            protocol="messages",
            input={
                "model": "claude-sonnet-4-5",
                "max_tokens": 64,
                "messages": [{"role": "user", "content": "Hi"}],
            },
            expected={"cache_control": {"type": "ephemeral"}},
        ),
        TransformExample(
            title="One-hour TTL",
            phase="request",
            protocol="messages",
            config={"ttl": "1h"},
            input={
                "model": "claude-sonnet-4-5",
                "max_tokens": 64,
                "messages": [{"role": "user", "content": "Hi"}],
            },
            expected={"cache_control": {"type": "ephemeral", "ttl": "1h"}},
        ),
        TransformExample(
            title="Not an Anthropic upstream: unchanged",
            phase="request",
            protocol="chat_completion",
            input={"model": "gpt-4o", "messages": [{"role": "user", "content": "Hi"}]},
            expected={"messages": [{"role": "user", "content": "Hi"}]},
            note={"en": "The body has no cache_control key.", "zh": "请求体中没有 cache_control 字段。"},
        ),
    )

    def apply_request(self, req: Request, ctx: TransformContext) -> None:
        if ctx.upstream_protocol != "messages":
            return
        apply_to_request(req, ctx, self.config["ttl"])
