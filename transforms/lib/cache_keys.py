"""Stable-prefix helpers shared by the OpenAI cache rules and the prefix stabiliser: what counts
as the prompt's stable prefix, and a canonical, restart-stable digest of JSON material."""

from __future__ import annotations

from gateway.urp import Node
from gateway.urp.canonical import canonical_json, jsonable, xxh3_128_hex

__all__ = [
    "PREFIX_ROLES",
    "VOLATILE_TAIL",
    "canonical_json",
    "jsonable",
    "stable_prefix_length",
    "xxh3_128_hex",
]

PREFIX_ROLES = frozenset({"system", "developer"})
# ctx.shared key: (node, text) that cache_prefix_stabilize appended to the end of ``node`` in this
# attempt, so cache_openai_prompt can leave those per-request lines out of its key material.
VOLATILE_TAIL = "cache_prefix_stabilize.volatile_tail"


def stable_prefix_length(nodes: list[Node]) -> int:
    """Length of the leading run of nodes whose role is system or developer. Tool calls and
    reasoning count as assistant, tool results and control nodes have no such role: all stop it."""
    for i, node in enumerate(nodes):
        if getattr(node, "role", None) not in PREFIX_ROLES:
            return i
    return len(nodes)
