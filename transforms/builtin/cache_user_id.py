"""cache_user_id: tell the upstream who the end user is when prompt caching is in play, so a
provider that partitions its cache by user (Anthropic ``metadata.user_id``, OpenAI ``user``) keeps
one user's turns together."""

from __future__ import annotations

from gateway.urp import Request
from transforms.base import Transform, TransformContext, TransformExample


class CacheUserId(Transform):
    """Needs the key owner's username (from the transform context) and at least one input node
    carrying a ``cache_control`` marker (the request-level marker does not count); otherwise a
    no-op. Sets the request's user when the client sent none; a client's value is never changed.

    In this gateway Anthropic's ``metadata.user_id`` and OpenAI's ``user`` are one typed field
    (the Messages codec decodes and encodes ``metadata.user_id`` as the request's user), so the
    reference's two sides are one assignment here and a Messages client's own ``user_id`` counts
    as "the client sent one". Uses no cache slot."""

    type_id = "cache_user_id"
    category = "cache"
    name = {"en": "Auto-cache: user identity", "zh": "自动缓存：用户身份"}
    description = {
        "en": "When the request carries cache markers, sends the key owner's username as the end-user id "
        "(Anthropic metadata.user_id, OpenAI user) unless the client already set one.",
        "zh": "当请求带有缓存标记时，将密钥所有者的用户名作为终端用户标识发送（Anthropic metadata.user_id、"
        "OpenAI user），客户端已设置时不覆盖。",
    }
    phases = ("request",)
    scopes = ("provider", "api_key")
    config_schema = {"type": "object", "properties": {}}  # the reference's parser ignores unknown keys
    aliases = ("auto_cache_user_id",)
    examples = (
        TransformExample(
            title="The key owner becomes metadata.user_id",
            phase="request",
            protocol="messages",
            context={"username": "alice"},
            input={
                "model": "claude-sonnet-4-5",
                "max_tokens": 64,
                "system": [{"type": "text", "text": "S", "cache_control": {"type": "ephemeral"}}],
                "messages": [{"role": "user", "content": "hi"}],
            },
            expected={"metadata": {"user_id": "alice"}},
        ),
        TransformExample(
            title="A client's user is kept",
            phase="request",
            protocol="messages",
            context={"username": "alice"},
            input={
                "model": "claude-sonnet-4-5",
                "max_tokens": 64,
                "metadata": {"user_id": "bob"},
                "system": [{"type": "text", "text": "S", "cache_control": {"type": "ephemeral"}}],
                "messages": [{"role": "user", "content": "hi"}],
            },
            expected={"metadata": {"user_id": "bob"}},
        ),
    )

    def apply_request(self, req: Request, ctx: TransformContext) -> None:
        username = ctx.username
        if not isinstance(username, str) or req.user is not None:
            return
        if any("cache_control" in node.extra for node in req.input):
            req.user = username
