"""Stable-prefix helpers shared by the OpenAI cache rules and the prefix stabiliser: what counts
as the prompt's stable prefix, and a canonical, restart-stable digest of JSON material."""

from __future__ import annotations

import json
from typing import Any

import xxhash

from gateway.urp import INTERNAL_PREFIX, Node
from gateway.urp.serialize import to_jsonable

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


def _scrub(value: Any) -> Any:
    """Drop gateway-internal keys (wire shape hints, provenance) so the same prompt written in two
    shapes hashes the same."""
    if isinstance(value, dict):
        return {k: _scrub(v) for k, v in value.items() if not (isinstance(k, str) and k.startswith(INTERNAL_PREFIX))}
    if isinstance(value, list):
        return [_scrub(v) for v in value]
    return value


def jsonable(value: Any) -> Any:
    """Typed objects (nodes, tools, response format) as plain JSON without internal keys."""
    return _scrub(to_jsonable(value))


def canonical_json(value: Any) -> bytes:
    """Compact JSON with object keys sorted at every level (UTF-8, non-ASCII kept)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def xxh3_128_hex(value: Any) -> str:
    """xxHash3-128 of the canonical JSON, 32 lowercase hex digits; stable across processes and
    restarts (no per-process seed, unlike ``hash``)."""
    return xxhash.xxh3_128_hexdigest(canonical_json(value))
