"""Shared helpers of the prompt and role transforms (not a transform itself).

"Role of a node" follows the reference primer: text, image, audio, file and provider items carry
their own role; refusal, reasoning and tool calls count as assistant; tool results and control
nodes have no role.
"""

from __future__ import annotations

from gateway.urp.nodes import (
    AudioNode,
    EnvelopeExtraNode,
    FileNode,
    ImageNode,
    Node,
    ProviderItemNode,
    ReasoningNode,
    RefusalNode,
    TextNode,
    ToolCallNode,
)

# Node kinds whose ``role`` field is their own (the ones role rewrites may touch).
ROLE_BEARING: tuple[type[Node], ...] = (TextNode, ImageNode, AudioNode, FileNode, ProviderItemNode)
# Role-bearing kinds that count as "ordinary" message content.
ORDINARY = ROLE_BEARING
_ASSISTANT_KINDS: tuple[type[Node], ...] = (RefusalNode, ReasoningNode, ToolCallNode)

NO_CONFIG_SCHEMA = {"type": "object", "properties": {}, "additionalProperties": False}


def node_role(node: Node) -> str | None:
    """The role a node speaks with, or None for tool results and control nodes."""
    if isinstance(node, ROLE_BEARING):
        return node.role  # type: ignore[attr-defined]
    if isinstance(node, _ASSISTANT_KINDS):
        return "assistant"
    return None


def is_control(node: Node) -> bool:
    return isinstance(node, EnvelopeExtraNode)


def rename_role(nodes: list[Node], old: str, new: str) -> None:
    """Give every role-bearing node with role ``old`` the role ``new`` (in place)."""
    for node in nodes:
        if isinstance(node, ROLE_BEARING) and node.role == old:  # type: ignore[attr-defined]
            node.role = new  # type: ignore[attr-defined]
