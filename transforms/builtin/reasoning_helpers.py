"""Shared pieces of the reasoning transforms (not a transform itself)."""

from __future__ import annotations

from typing import Any

from gateway.urp.nodes import Node, ReasoningNode

NO_CONFIG: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": False}
# Config of the rules whose reference parser ignores unknown keys but that take no options.
NO_OPTIONS: dict[str, Any] = {"type": "object", "properties": {}}

TAG_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "tag": {"type": "string", "minLength": 1, "pattern": "^[^<>/\\s]+$",
                "title": "Tag name", "description": "Used literally as <tag> and </tag>."},
    },
    "required": ["tag"],
}


def reasoning_nodes(nodes: list[Node]) -> list[ReasoningNode]:
    return [n for n in nodes if type(n) is ReasoningNode]
