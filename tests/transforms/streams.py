"""Helpers for stream-transform tests: build a canonical event stream from complete nodes (with
chosen delta splits), run it through a rule with the real chain engine, check the lifecycle, and
fold the result back with ``urp.accumulate`` the way a client's SDK accumulator would."""

from __future__ import annotations

from copy import copy, deepcopy
from typing import Any

from gateway.urp import ReasoningNode, RefusalNode, Response, TextNode, ToolCallNode
from gateway.urp import events as ev
from gateway.urp.accumulate import Accumulator
from gateway.urp.nodes import Node
from transforms.base import Transform, TransformContext
from transforms.engine import CompiledRule, StreamChain, run_response


def header(node: Node) -> Node:
    """The node with its payload emptied (what a NodeStart carries)."""
    h = copy(node)
    h.extra = dict(node.extra)
    if isinstance(h, TextNode | RefusalNode):
        h.content = ""
    elif isinstance(h, ToolCallNode):
        h.arguments = ""
    elif isinstance(h, ReasoningNode):
        h.content = h.summary = h.encrypted = None
    return h


def chunks(text: str, cuts: list[int] | None) -> list[str]:
    """``text`` cut at the given positions (None: one character per delta)."""
    if cuts is None:
        return list(text)
    points = sorted({c for c in cuts if 0 < c < len(text)})
    out, last = [], 0
    for p in points:
        out.append(text[last:p])
        last = p
    out.append(text[last:])
    return [c for c in out if c]


def stream_of(nodes: list[Node], cuts: list[int] | None = None) -> list[ev.Event]:
    """A well-formed stream that ends with ``nodes``: each node's fields cut the same way."""
    out: list[ev.Event] = [ev.ResponseStart(id="resp_1", model="m")]
    for i, node in enumerate(nodes):
        out.append(ev.NodeStart(index=i, node=header(node)))
        fields: list[tuple[str, str | None]] = []
        if isinstance(node, TextNode):
            fields = [(ev.TEXT, node.content)]
        elif isinstance(node, RefusalNode):
            fields = [(ev.REFUSAL, node.content)]
        elif isinstance(node, ToolCallNode):
            fields = [(ev.ARGUMENTS, node.arguments)]
        elif isinstance(node, ReasoningNode):
            fields = [
                (ev.REASONING_CONTENT, node.content),
                (ev.REASONING_SUMMARY, node.summary),
                (ev.REASONING_ENCRYPTED, node.encrypted if isinstance(node.encrypted, str) else None),
            ]
        for kind, value in fields:
            for piece in chunks(value or "", cuts):
                out.append(ev.NodeDelta(index=i, kind=kind, delta=piece))
        out.append(ev.NodeDone(index=i, node=deepcopy(node)))
    out.append(ev.ResponseDone(output=deepcopy(nodes), finish_reason="stop"))
    return out


def ctx(**fields: Any) -> TransformContext:
    base: dict[str, Any] = {
        "logical_model": "m",
        "client_protocol": "responses",
        "upstream_protocol": "chat_completion",
        "stream": True,
    }
    base.update(fields)
    return TransformContext(**base)


def run_stream(
    transform: Transform, events: list[ev.Event], context: TransformContext | None = None
) -> list[ev.Event]:
    rule = CompiledRule(1, "provider", "response", None, transform)
    chain = StreamChain([rule], context or ctx())
    out: list[ev.Event] = []
    for event in events:
        out.extend(chain.process(event))
    return out


def run_whole(transform: Transform, nodes: list[Node], context: TransformContext | None = None) -> list[Node]:
    resp = Response(id="resp_1", model="m", output=deepcopy(nodes))
    run_response(
        [CompiledRule(1, "provider", "response", None, transform)], resp, context or ctx(stream=False)
    )
    return resp.output


def check_lifecycle(events: list[ev.Event]) -> None:
    """Per index: one start, deltas, one done, in that order; the stream ends with ResponseDone
    whose output positions are the node indices."""
    started: set[int] = set()
    done: set[int] = set()
    for event in events:
        if isinstance(event, ev.NodeStart):
            assert event.index not in started, f"second start for {event.index}"
            started.add(event.index)
        elif isinstance(event, ev.NodeDelta):
            assert event.index in started and event.index not in done, f"delta outside lifecycle {event}"
        elif isinstance(event, ev.NodeDone):
            assert event.index in started and event.index not in done, f"done outside lifecycle {event}"
            done.add(event.index)
    assert started == done, "every started node completes"
    assert isinstance(events[-1], ev.ResponseDone)
    assert sorted(started) == list(range(len(started))), "indices are dense"


def accumulated(events: list[ev.Event]) -> list[Node]:
    """What an SDK accumulator ends with: nodes folded from the streamed starts and deltas."""
    acc = Accumulator()
    for event in events:
        if isinstance(event, ev.NodeStart | ev.NodeDelta):
            acc.feed(event)
    return acc.output()


def done_nodes(events: list[ev.Event]) -> list[Node]:
    nodes = {e.index: e.node for e in events if isinstance(e, ev.NodeDone)}
    return [nodes[i] for i in sorted(nodes)]


def terminal(events: list[ev.Event]) -> list[Node]:
    last = events[-1]
    assert isinstance(last, ev.ResponseDone)
    return last.output


def plain(nodes: list[Node]) -> list[tuple]:
    """A comparable view of nodes (type and payload, internal markers ignored)."""
    out = []
    for n in nodes:
        if isinstance(n, TextNode):
            out.append(("text", n.role, n.content))
        elif isinstance(n, ReasoningNode):
            out.append(("reasoning", n.content, n.summary, n.encrypted))
        elif isinstance(n, ToolCallNode):
            out.append(("call", n.call_id, n.name, n.arguments))
        else:
            out.append((n.type,))
    return out
