"""Folding stream events back into complete nodes: shared by stream decoders (to build the
authoritative ``ResponseDone.output``) and by runtime code that needs a whole response."""

from __future__ import annotations

from copy import copy

from . import events as ev
from .nodes import Node, ReasoningNode, RefusalNode, TextNode, ToolCallNode


def apply_delta(node: Node, kind: str, delta: str) -> None:
    """Append one fragment to a node under construction."""
    if kind == ev.TEXT and isinstance(node, TextNode):
        node.content += delta
    elif kind == ev.REFUSAL and isinstance(node, RefusalNode):
        node.content += delta
    elif kind == ev.ARGUMENTS and isinstance(node, ToolCallNode):
        node.arguments += delta
    elif isinstance(node, ReasoningNode):
        if kind == ev.REASONING_CONTENT:
            node.content = (node.content or "") + delta
        elif kind == ev.REASONING_SUMMARY:
            node.summary = (node.summary or "") + delta
        elif kind == ev.REASONING_ENCRYPTED:
            node.encrypted = (node.encrypted or "") + delta if isinstance(node.encrypted, str | None) else delta


class Accumulator:
    """Tracks nodes by index from NodeStart/NodeDelta/NodeDone events."""

    __slots__ = ("nodes", "done")

    def __init__(self) -> None:
        self.nodes: dict[int, Node] = {}
        self.done: set[int] = set()

    def feed(self, event: ev.Event) -> None:
        if isinstance(event, ev.NodeStart):
            self.nodes[event.index] = copy(event.node)
        elif isinstance(event, ev.NodeDelta):
            node = self.nodes.get(event.index)
            if node is not None:
                apply_delta(node, event.kind, event.delta)
        elif isinstance(event, ev.NodeDone):
            self.nodes[event.index] = event.node
            self.done.add(event.index)

    def output(self) -> list[Node]:
        return [self.nodes[i] for i in sorted(self.nodes)]
