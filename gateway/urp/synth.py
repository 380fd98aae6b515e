"""Synthesising a stream from a whole response.

Used when a response rule needs the whole response (the upstream is called without streaming)
or when the upstream answered with a plain JSON body although a stream was asked for: the
client still gets a protocol-correct stream, produced by its normal stream encoder from these
events. The events keep the invariants of ``gateway.urp.events``: indices 0..n-1, one
NodeStart/NodeDone per node with deltas in between, exactly one terminal ResponseDone whose
``output`` is the response's node list.
"""

from __future__ import annotations

from dataclasses import replace

from . import events as ev
from .nodes import Node, ReasoningNode, RefusalNode, TextNode, ToolCallNode
from .request import Response


def _header_and_deltas(index: int, node: Node) -> tuple[Node, list[ev.NodeDelta]]:
    """The node's header (identity, empty content) and the deltas that rebuild its content."""
    if isinstance(node, TextNode):
        deltas = [ev.NodeDelta(index=index, kind=ev.TEXT, delta=node.content)] if node.content else []
        return replace(node, content=""), deltas
    if isinstance(node, RefusalNode):
        deltas = [ev.NodeDelta(index=index, kind=ev.REFUSAL, delta=node.content)] if node.content else []
        return replace(node, content=""), deltas
    if isinstance(node, ToolCallNode):
        deltas = (
            [ev.NodeDelta(index=index, kind=ev.ARGUMENTS, delta=node.arguments)] if node.arguments else []
        )
        return replace(node, arguments=""), deltas
    if isinstance(node, ReasoningNode):
        deltas = []
        if node.content:
            deltas.append(ev.NodeDelta(index=index, kind=ev.REASONING_CONTENT, delta=node.content))
        if node.summary:
            deltas.append(ev.NodeDelta(index=index, kind=ev.REASONING_SUMMARY, delta=node.summary))
        encrypted = node.encrypted
        if isinstance(encrypted, str) and encrypted:
            deltas.append(ev.NodeDelta(index=index, kind=ev.REASONING_ENCRYPTED, delta=encrypted))
            encrypted = None
        # A non-string opaque payload cannot be split into fragments: it rides on the header.
        return replace(node, content=None, summary=None, encrypted=encrypted), deltas
    # Images, files, tool results, provider items and control nodes have no deltas.
    return node, []


def response_to_events(resp: Response) -> list[ev.Event]:
    """The stream of events equivalent to ``resp``."""
    out: list[ev.Event] = [ev.ResponseStart(id=resp.id, model=resp.model, created=resp.created)]
    for index, node in enumerate(resp.output):
        header, deltas = _header_and_deltas(index, node)
        out.append(ev.NodeStart(index=index, node=header))
        out.extend(deltas)
        out.append(ev.NodeDone(index=index, node=node))
    out.append(
        ev.ResponseDone(
            output=list(resp.output),
            finish_reason=resp.finish_reason,
            usage=resp.usage,
            extra=dict(resp.extra),
        )
    )
    return out
