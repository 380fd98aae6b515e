"""role_system_to_developer: system-role content becomes developer-role content, for OpenAI
reasoning models that expect developer instructions."""

from __future__ import annotations

from gateway.urp import Request
from transforms.base import ALL_SCOPES, Transform, TransformContext, TransformExample
from transforms.lib.role_helpers import NO_CONFIG_SCHEMA, rename_role


class RoleSystemToDeveloper(Transform):
    """Mirror of role_developer_to_system: role system becomes developer on text, image, audio,
    file and provider-item nodes; nothing else changes."""

    type_id = "role_system_to_developer"
    aliases = ("system_to_developer_role",)
    category = "role"
    name = {"en": "Role: system to developer", "zh": "角色：system 转 developer"}
    description = {
        "en": "Rewrites system-role messages as developer messages (OpenAI reasoning models prefer the developer role).",
        "zh": "将 system 角色的消息改写为 developer 角色（OpenAI 推理模型更适合使用 developer 角色）。",
    }
    phases = ("request",)
    scopes = ALL_SCOPES
    config_schema = NO_CONFIG_SCHEMA

    examples = (
        TransformExample(
            title="A system message becomes a developer message",
            phase="request",
            input={
                "model": "gpt-4o",
                "messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}],
            },
            expected={"messages": [{"role": "developer", "content": "S"}, {"role": "user", "content": "U"}]},
        ),
    )

    def apply_request(self, req: Request, ctx: TransformContext) -> None:
        rename_role(req.input, "system", "developer")
