"""Shared pieces of the reasoning transforms (not a transform itself)."""

from __future__ import annotations

from typing import Any

from gateway.urp.nodes import EnvelopeExtraNode, Node, ReasoningNode

NO_CONFIG: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": False}
# Config of the rules whose reference parser ignores unknown keys but that take no options.
NO_OPTIONS: dict[str, Any] = {"type": "object", "properties": {}}

TAG_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "tag": {
            "type": "string",
            "minLength": 1,
            "pattern": "^[^<>/\\s]+$",
            "title": "Tag name",
            "description": "Used literally as <tag> and </tag>.",
        },
    },
    "required": ["tag"],
}


def reasoning_nodes(nodes: list[Node]) -> list[ReasoningNode]:
    return [n for n in nodes if type(n) is ReasoningNode]


# Reasoning text a Chat decoder keeps on a control node (the message's legacy ``reasoning`` /
# ``reasoning_content`` scalars, replayed verbatim on a same-protocol hop).
REASONING_SCALARS = ("reasoning", "reasoning_content")


def drop_reasoning_scalars(nodes: list[Node]) -> None:
    """Remove passthrough reasoning text from control nodes, for rules that take reasoning out
    of a response: otherwise a same-protocol Chat hop would still carry it."""
    for node in nodes:
        if type(node) is EnvelopeExtraNode and node.extra:
            for key in REASONING_SCALARS:
                node.extra.pop(key, None)
