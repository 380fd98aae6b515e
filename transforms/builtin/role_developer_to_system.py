"""role_developer_to_system: developer-role content becomes system-role content, for upstreams
that do not know the developer role."""

from __future__ import annotations

from gateway.urp import Request
from transforms.base import ALL_SCOPES, Transform, TransformContext, TransformExample
from transforms.lib.role_helpers import NO_CONFIG_SCHEMA, rename_role


class RoleDeveloperToSystem(Transform):
    """Every role-bearing node (text, image, audio, file, provider item) with role developer gets
    role system. Tool calls, tool results, reasoning and control nodes are untouched."""

    type_id = "role_developer_to_system"
    aliases = ("developer_to_system_role",)
    category = "role"
    name = {"en": "Role: developer to system", "zh": "角色：developer 转 system"}
    description = {
        "en": "Rewrites developer-role messages as system messages, for upstreams that reject the developer role.",
        "zh": "将 developer 角色的消息改写为 system 角色，适用于不支持 developer 角色的上游。",
    }
    phases = ("request",)
    scopes = ALL_SCOPES
    config_schema = NO_CONFIG_SCHEMA
    examples = (
        TransformExample(
            title="A developer message becomes a system message",
            phase="request",
            protocol="responses",
            input={
                "model": "o3",
                "input": [
                    {"type": "message", "role": "developer", "content": "Answer in French."},
                    {"type": "message", "role": "user", "content": "Hi"},
                ],
            },
            expected={
                "input": [
                    {"type": "message", "role": "system", "content": "Answer in French."},
                    {"type": "message", "role": "user", "content": "Hi"},
                ]
            },
        ),
    )

    def apply_request(self, req: Request, ctx: TransformContext) -> None:
        rename_role(req.input, "developer", "system")
