"""cache_openai_prompt: a stable ``prompt_cache_key`` (and retention) for OpenAI upstreams, so
requests that share a prompt prefix are routed to the same cache shard upstream."""

from __future__ import annotations

from typing import Any

from gateway.urp import Request
from transforms.base import Transform, TransformContext, TransformExample
from transforms.lib.cache_keys import VOLATILE_TAIL, jsonable, stable_prefix_length, xxh3_128_hex

_OPENAI = frozenset({"responses", "chat_completion"})


def _drop_tail(prefix: list, serialised: list[dict[str, Any]], node: Any, tail: str) -> None:
    """Remove the volatile lines cache_prefix_stabilize relocated to the end of ``node`` from the
    serialised copy, so a date line that changes per request does not change the key."""
    for original, copy in zip(prefix, serialised, strict=True):
        if original is node and isinstance(copy.get("content"), str) and copy["content"].endswith(tail):
            copy["content"] = copy["content"][: -len(tail)].rstrip("\n")


class CacheOpenaiPrompt(Transform):
    """Only for Responses and Chat Completions upstreams. Sets ``prompt_cache_key`` and
    ``prompt_cache_retention`` when the client sent none (a client's value, of any JSON type, is
    never overwritten).

    The key is ``<key_prefix>_<xxHash3-128 hex>`` over canonical JSON (keys sorted, compact) of:
    in ``prefix`` mode the upstream model, the leading system/developer nodes (or the whole input
    with ``include_full_input_in_key``), the tools and response format when present, and with
    ``include_user_in_key`` the request's ``user`` or else the key owner's username; in
    ``identity`` mode exactly ``{"username", "api_key_id"}`` of the calling key (from the
    transform context, never from the request). Gateway-internal shape hints are left out of the
    material, so one prompt hashes alike whichever wire shape carried it. Run it after
    cache_prefix_stabilize and prompt_strip_anthropic_billing_header.

    Difference from the reference: the lines cache_prefix_stabilize relocated to the end of the
    prefix in this attempt are left out of the material (the reference hashed them, so a
    relocated date line still changed the key every day); identical keys with the Rust service
    are not a goal here."""

    type_id = "cache_openai_prompt"
    category = "cache"
    name = {"en": "Auto-cache: OpenAI prompt key", "zh": "自动缓存：OpenAI 提示词缓存键"}
    description = {
        "en": "Adds a stable prompt_cache_key derived from the stable prompt prefix (or the caller's "
        "identity) and a prompt_cache_retention, for OpenAI Responses and Chat Completions "
        "upstreams. Never overwrites values the client sent.",
        "zh": "为 OpenAI Responses 与 Chat Completions 上游添加由稳定提示词前缀（或调用者身份）派生的稳定 "
        "prompt_cache_key 以及 prompt_cache_retention。不会覆盖客户端自带的值。",
    }
    phases = ("request",)
    scopes = ("provider", "global", "api_key")
    config_schema = {
        "type": "object",
        "properties": {
            "retention": {
                "type": "string",
                "enum": ["24h", "in_memory"],
                "default": "24h",
                "description": "prompt_cache_retention to set when the client sent none.",
            },
            "key_prefix": {
                "type": "string",
                "minLength": 1,
                "pattern": r"\S",
                "default": "mzpc",
                "description": "Text before the hash in the key.",
            },
            "key_mode": {
                "type": "string",
                "enum": ["prefix", "identity"],
                "default": "prefix",
                "description": "prefix: hash the stable prompt prefix; identity: hash the key owner and key id.",
            },
            "include_user_in_key": {
                "type": "boolean",
                "default": False,
                "description": "Prefix mode: add the request's user (or the key owner) to the material.",
            },
            "include_full_input_in_key": {
                "type": "boolean",
                "default": False,
                "description": "Prefix mode: hash the whole input instead of the system prefix.",
            },
        },
        "additionalProperties": False,
    }
    aliases = (
        "auto_cache_openai",
        "auto_cache_openai_prompt",
        "auto_cache_openai_prompt_key",
        "openai_prompt_cache",
    )
    examples = (
        TransformExample(
            title="A key from the system prefix and the default retention",
            phase="request",
            protocol="responses",
            input={
                "model": "gpt-5.5",
                "input": [
                    {"type": "message", "role": "system", "content": "You are a coding assistant."},
                    {"type": "message", "role": "user", "content": "Fix the bug"},
                ],
            },
            expected={
                "prompt_cache_key": "mzpc_7c4ce6de1b43cc47d14d4262cba6e2fd",
                "prompt_cache_retention": "24h",
            },
            note={
                "en": "Any user message after the same system prompt gives the same key.",
                "zh": "同一系统提示词之后的任何用户消息得到相同的键。",
            },
        ),
        TransformExample(
            title="A client's key is kept; only a missing retention is added",
            phase="request",
            protocol="chat_completion",
            config={"retention": "in_memory"},
            input={
                "model": "gpt-4o",
                "prompt_cache_key": "mine",
                "messages": [{"role": "user", "content": "Hi"}],
            },
            expected={"prompt_cache_key": "mine", "prompt_cache_retention": "in_memory"},
        ),
    )

    def _material(self, req: Request, ctx: TransformContext) -> dict[str, Any]:
        cfg = self.config
        if cfg["key_mode"] == "identity":
            return {
                "username": ctx.username,
                "api_key_id": str(ctx.api_key_id) if ctx.api_key_id is not None else None,
            }
        material: dict[str, Any] = {"model": req.model}
        if cfg["include_full_input_in_key"]:
            material["input"] = jsonable(req.input)
        else:
            prefix = req.input[: stable_prefix_length(req.input)]
            material["prefix_nodes"] = jsonable(prefix)
            tail = ctx.shared.get(VOLATILE_TAIL)
            if tail is not None:
                _drop_tail(prefix, material["prefix_nodes"], *tail)
        if req.tools:
            material["tools"] = jsonable(req.tools)
        if req.response_format is not None:
            material["response_format"] = jsonable(req.response_format)
        if cfg["include_user_in_key"]:
            user = req.user if req.user is not None else ctx.username
            if user is not None:
                material["user"] = user
        return material

    def apply_request(self, req: Request, ctx: TransformContext) -> None:
        if ctx.upstream_protocol not in _OPENAI:
            return
        if "prompt_cache_key" not in req.extra:
            req.extra["prompt_cache_key"] = (
                f"{self.config['key_prefix']}_{xxh3_128_hex(self._material(req, ctx))}"
            )
        if "prompt_cache_retention" not in req.extra:
            req.extra["prompt_cache_retention"] = self.config["retention"]
