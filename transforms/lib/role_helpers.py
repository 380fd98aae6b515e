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
# Exact-type sets: node kinds are never subclassed, and a set lookup is cheaper than isinstance.
_ROLE_BEARING_TYPES = frozenset(ROLE_BEARING)
_ASSISTANT_TYPES = frozenset(_ASSISTANT_KINDS)

NO_CONFIG_SCHEMA = {"type": "object", "properties": {}, "additionalProperties": False}


def node_role(node: Node) -> str | None:
    """The role a node speaks with, or None for tool results and control nodes."""
    kind = type(node)
    if kind in _ROLE_BEARING_TYPES:
        return node.role  # type: ignore[attr-defined]
    if kind in _ASSISTANT_TYPES:
        return "assistant"
    return None


def has_own_role(node: Node, role: str) -> bool:
    """True for a role-bearing node (text, image, audio, file, provider item) with ``role``."""
    return type(node) in _ROLE_BEARING_TYPES and node.role == role  # type: ignore[attr-defined]


def is_control(node: Node) -> bool:
    return isinstance(node, EnvelopeExtraNode)


def rename_role(nodes: list[Node], old: str, new: str) -> None:
    """Give every role-bearing node with role ``old`` the role ``new`` (in place)."""
    for node in nodes:
        if type(node) in _ROLE_BEARING_TYPES and node.role == old:  # type: ignore[attr-defined]
            node.role = new  # type: ignore[attr-defined]
