"""role_assistant_image_to_user: move images out of assistant turns into the next user turn,
because some Chat Completions upstreams accept but silently drop assistant images."""

from __future__ import annotations

from gateway.urp import ImageNode, Request
from gateway.urp.nodes import Node
from transforms.base import ALL_SCOPES, Transform, TransformContext, TransformExample
from transforms.lib.role_helpers import NO_CONFIG_SCHEMA, ORDINARY


class RoleAssistantImageToUser(Transform):
    """Every assistant image node is removed from its place, gets role user and no id (source
    and extras unchanged) and is inserted immediately before its anchor: the first ordinary
    user node (text, image, audio, file, provider item) after it in the original order. Tool
    calls, tool results, control nodes and other roles are skipped over when looking for the
    anchor. Images sharing an anchor keep their order; images without one go to the end, in
    order. Everything else keeps its relative order. Idempotent."""

    type_id = "role_assistant_image_to_user"
    category = "role"
    name = {"en": "Role: assistant image to user", "zh": "角色：助手图片转为用户图片"}
    description = {
        "en": "Moves images from assistant messages into the following user message, for upstreams "
        "that silently drop assistant images.",
        "zh": "将助手消息中的图片移动到其后的用户消息中，适用于会静默丢弃助手图片的上游。",
    }
    phases = ("request",)
    scopes = ALL_SCOPES
    config_schema = NO_CONFIG_SCHEMA

    examples = (
        TransformExample(
            title="An assistant image moves just before the next user message, as a user image",
            phase="request",
            input={
                "model": "gpt-4o",
                "messages": [
                    {"role": "user", "content": "sharing now"},
                    {
                        "role": "assistant",
                        "content": [
                            {"type": "text", "text": "shown below"},
                            {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}},
                        ],
                    },
                    {"role": "user", "content": "what color is it?"},
                ],
            },
            expected={
                "messages": [
                    {"role": "user", "content": "sharing now"},
                    {"role": "assistant", "content": [{"type": "text", "text": "shown below"}]},
                    {
                        "role": "user",
                        "content": [{"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}],
                    },
                    {"role": "user", "content": "what color is it?"},
                ]
            },
        ),
        TransformExample(
            title="Without a later user message the image goes to the end",
            phase="request",
            input={
                "model": "gpt-4o",
                "messages": [
                    {"role": "user", "content": "q"},
                    {
                        "role": "assistant",
                        "content": [
                            {"type": "text", "text": "a"},
                            {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}},
                        ],
                    },
                ],
            },
            expected={
                "messages": [
                    {"role": "user", "content": "q"},
                    {"role": "assistant", "content": [{"type": "text", "text": "a"}]},
                    {
                        "role": "user",
                        "content": [{"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}],
                    },
                ]
            },
        ),
    )

    def apply_request(self, req: Request, ctx: TransformContext) -> None:
        nodes = req.input
        if not any(type(n) is ImageNode and n.role == "assistant" for n in nodes):
            return
        out: list[Node] = []
        pending: list[Node] = []  # moved images waiting for the next user anchor
        for node in nodes:
            if type(node) is ImageNode and node.role == "assistant":
                node.role = "user"
                node.id = None
                pending.append(node)
                continue
            if pending and isinstance(node, ORDINARY) and node.role == "user":  # type: ignore[attr-defined]
                out.extend(pending)
                pending.clear()
            out.append(node)
        out.extend(pending)
        req.input[:] = out
