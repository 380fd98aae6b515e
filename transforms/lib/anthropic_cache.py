"""The shared Anthropic cache-marker rules (reference transforms.md 3.1, "Shared").

A *breakpoint* is a ``cache_control`` key in the ``extra`` of a top-level input node (any kind;
nested tool-result entries do not count); the request-level ``extra["cache_control"]`` counts as
one more slot for the system and tool-use rules. Anthropic accepts at most four, so a rule never
inserts a fifth.

Ownership: a rule may re-tune (overwrite) a marker only when this same attempt wrote it. The
record of what was written lives in ``TransformContext.shared`` under ``OWNER_KEY``: that map is
created per attempt, is never serialised (not in the capture, not on the wire) and no decoder can
fill it, so a client can never make the gateway overwrite its own markers. A node is identified by
(index, input length, SHA-256 of its canonical JSON); when another node is structurally equal the
ownership is ambiguous and no record is kept (the marker is then treated as foreign).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from gateway.urp import Node, Request, ToolResultNode
from gateway.urp.serialize import to_jsonable
from transforms.base import TransformContext

MAX_BREAKPOINTS = 4
OWNER_KEY = "anthropic_cache_owner"
MARKER = "cache_control"

TTL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "ttl": {
            "type": "string",
            "enum": ["5m", "1h"],
            "default": "5m",
            "description": "Cache lifetime: 5m (Anthropic's default) or 1h (costs more to write).",
        },
    },
    "additionalProperties": False,
}

# Target kinds of the ownership record.
SYSTEM = "system"
LAST_TOOL_RESULT = "last_tool_result"
REQUEST = "request"


def marker(ttl: str) -> dict[str, Any]:
    """``5m`` is written without a ttl key (Anthropic's default, the older wire output)."""
    return {"type": "ephemeral", "ttl": "1h"} if ttl == "1h" else {"type": "ephemeral"}


def _digest(value: Any) -> str:
    raw = json.dumps(to_jsonable(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(raw.encode()).hexdigest()


def node_breakpoints(req: Request) -> int:
    return sum(1 for node in req.input if MARKER in node.extra)


def _node_snapshot(req: Request, index: int) -> tuple[int, int, str] | None:
    node = req.input[index]
    for i, other in enumerate(req.input):
        if i != index and other == node:
            return None  # structurally equal twin: ownership ambiguous
    return (index, len(req.input), _digest(node))


def _owners(ctx: TransformContext) -> dict[str, Any]:
    return ctx.shared.setdefault(OWNER_KEY, {})


def apply_to_node(req: Request, ctx: TransformContext, kind: str, index: int, ttl: str) -> None:
    """The ownership algorithm for a node target; the request-level marker counts as a slot."""
    owners = _owners(ctx)
    node: Node = req.input[index]
    owned = kind in owners and owners[kind] == _node_snapshot(req, index)
    if not owned:
        owners.pop(kind, None)
    if MARKER in node.extra:
        if not owned:
            return  # the client's (or someone else's) marker: leave it exactly as is
    else:
        used = node_breakpoints(req) + (1 if MARKER in req.extra else 0)
        if used >= MAX_BREAKPOINTS:
            return
    node.extra[MARKER] = marker(ttl)
    snap = _node_snapshot(req, index)
    if snap is None:
        owners.pop(kind, None)
    else:
        owners[kind] = snap


def apply_to_request(req: Request, ctx: TransformContext, ttl: str) -> None:
    """The ownership algorithm for the request-level marker (Anthropic automatic caching)."""
    owners = _owners(ctx)
    current = req.extra.get(MARKER)
    owned = REQUEST in owners and MARKER in req.extra and owners[REQUEST] == _digest(current)
    if not owned:
        owners.pop(REQUEST, None)
    if MARKER in req.extra:
        if not owned:
            return
    elif node_breakpoints(req) >= MAX_BREAKPOINTS:
        return
    value = marker(ttl)
    req.extra[MARKER] = value
    owners[REQUEST] = _digest(value)


def last_system_index(req: Request) -> int | None:
    """The last node whose role is system or developer (any kind that has such a role)."""
    for i in range(len(req.input) - 1, -1, -1):
        if getattr(req.input[i], "role", None) in ("system", "developer"):
            return i
    return None


def trailing_tool_result_index(req: Request) -> int | None:
    if req.input and isinstance(req.input[-1], ToolResultNode):
        return len(req.input) - 1
    return None
