"""Conversation-level helpers on a URP node list (no protocol, no HTTP).

``remove_orphan_tool_exchanges`` is used by the per-attempt preparation in the proxy
(``gateway.proxy.prepare``) and by the ``prompt_strip_orphaned_tool_calls`` transform.
"""

from __future__ import annotations

from .nodes import (
    EnvelopeExtraNode,
    Node,
    ProviderItemNode,
    ReasoningNode,
    RefusalNode,
    ToolCallNode,
    ToolResultNode,
)


def _turn_break(node: Node) -> bool:
    """True when ``node`` starts a new turn after an assistant's tool calls."""
    if isinstance(node, ToolResultNode):
        return True
    if isinstance(node, ToolCallNode | ReasoningNode | RefusalNode | EnvelopeExtraNode):
        return False
    if isinstance(node, ProviderItemNode):
        return node.role not in ("assistant",)
    return getattr(node, "role", "user") != "assistant"


def remove_orphan_tool_exchanges(
    nodes: list[Node], *, calls: bool = True, results: bool = True, keep_pending_calls: bool = True
) -> list[Node]:
    """A new node list without incomplete tool exchanges.

    ``calls``: remove tool calls that no tool result answers. With ``keep_pending_calls`` a call
    is kept when nothing but the same assistant turn follows it (the conversation is waiting for
    its result); without it every unanswered call goes (what Anthropic needs after a client
    truncated its history). ``results``: remove tool results whose call is not in the list.
    """
    call_ids: set[str] = set()
    result_ids: set[str] = set()
    for n in nodes:  # one pass: this runs on every attempt, over the whole history
        if isinstance(n, ToolCallNode):
            call_ids.add(n.call_id)
        elif isinstance(n, ToolResultNode):
            result_ids.add(n.call_id)
    if call_ids == result_ids:
        return nodes
    later_break = [False] * len(nodes)
    seen_break = False
    for i in range(len(nodes) - 1, -1, -1):
        later_break[i] = seen_break
        if _turn_break(nodes[i]):
            seen_break = True
    out: list[Node] = []
    for i, node in enumerate(nodes):
        if calls and isinstance(node, ToolCallNode) and node.call_id not in result_ids:
            if not keep_pending_calls or later_break[i]:
                continue
        if results and isinstance(node, ToolResultNode) and node.call_id not in call_ids:
            continue
        out.append(node)
    return out
