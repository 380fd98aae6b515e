"""Anthropic Messages streaming encoder: canonical events -> client SSE (reference §4.8)."""

from __future__ import annotations

from copy import copy
from dataclasses import replace
from typing import Any

from gateway.urp import (
    Node,
    NodeDelta,
    NodeDone,
    NodeStart,
    ProviderItemNode,
    ReasoningNode,
    RefusalNode,
    ResponseDone,
    ResponseStart,
    StreamError,
    TextNode,
    ToolCallNode,
    Usage,
)
from gateway.urp import events as ev
from gateway.urp.accumulate import append_text

from ..base import EncodeContext, new_id, put_extra
from ..sse import frame
from .common import (
    PROTOCOL,
    REASONING_KIND,
    START_USAGE,
    client_signature,
    encode_usage,
    error_object,
    scrub,
    stop_to_wire,
)


class _Out:
    """One URP node on its way to the client: which block type it becomes, whether its block is
    open, what was already streamed, and events buffered while an earlier block is open."""

    __slots__ = (
        "index",
        "kind",
        "header",
        "block",
        "streamed",
        "rkind",
        "buffer",
        "done",
        "parked",
        "encrypted",
        "signed",
    )

    def __init__(self, index: int, kind: str, header: Node) -> None:
        self.index = index
        self.kind = kind  # text | thinking | redacted | tool | item | skip
        self.header = header
        self.block: int | None = None
        self.streamed = ""
        self.rkind: str | None = None
        self.buffer: list[tuple[str, Any]] = []
        self.done = False
        self.parked = False  # its block was closed early so a later node could stream
        self.encrypted = ""  # reasoning payload fragments seen so far (thinking blocks)
        self.signed: str | None = None  # the signature already written into its block


def _classify(node: Node) -> str:
    if isinstance(node, TextNode | RefusalNode):
        return "text"
    if isinstance(node, ReasoningNode):
        return "redacted" if node.extra.get(REASONING_KIND) == "redacted_thinking" else "thinking"
    if isinstance(node, ToolCallNode):
        return "tool" if node.tool_type == "function" else "skip"
    if isinstance(node, ProviderItemNode):
        return "item" if node.origin_protocol == PROTOCOL else "skip"
    return "skip"


_PING = b'event: ping\ndata: {"type":"ping"}\n\n'


class StreamEncoder:
    """Canonical events -> Messages client SSE.

    Block indices are contiguous from 0 in emission order and only one block is open at a time:
    a node that starts while another block is open is buffered until that block closes. Text
    and thinking blocks open on their first visible content, so nodes that end empty leave no
    block and no index gap. Signatures are written once, from the complete node, at block close.

    Deliberate differences from the reference: any reasoning text (plaintext content or a
    Responses summary, whichever streams first for that node) is shown as ``thinking_delta`` so
    Claude-style clients see the model think whatever the upstream; and a text/thinking block is
    closed early when a later node starts streaming (see ``_preempt_until``) instead of holding
    that later node back until the earlier one's NodeDone, which Chat upstreams send only at EOF.
    """

    def __init__(self, ctx: EncodeContext) -> None:
        self.ctx = ctx
        self.same = ctx.source_protocol == PROTOCOL
        self.extras = self.same or not ctx.strip_nested
        self.started = False
        self.finished = False
        self._id: str | None = None
        self._next_block = 0
        self._active: _Out | None = None
        self._queue: list[_Out] = []
        self._outs: dict[int, _Out] = {}
        self._max_index = -1
        self._has_tool = False

    # -- framing helpers
    def _message_start(self, start: ResponseStart | None) -> bytes:
        self.started = True
        usage: Any = None
        msg_extra: dict[str, Any] = {}
        if start is not None:
            self._id = start.id or None
            if self.same:
                usage = start.extra.get(START_USAGE)
                msg_extra = start.extra
        message: dict[str, Any] = {
            "id": self._id or new_id("msg_"),
            "type": "message",
            "role": "assistant",
            "model": self.ctx.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": encode_usage(usage if isinstance(usage, Usage) else None, same_family=self.same),
        }
        put_extra(message, msg_extra)
        return frame({"type": "message_start", "message": message}, "message_start")

    def _open(self, out: _Out, block: dict[str, Any]) -> bytes:
        out.block = self._next_block
        self._next_block += 1
        if self.extras:
            put_extra(block, out.header.extra)
        return frame(
            {"type": "content_block_start", "index": out.block, "content_block": block}, "content_block_start"
        )

    def _delta_frame(self, out: _Out, delta: dict[str, Any]) -> bytes:
        return frame(
            {"type": "content_block_delta", "index": out.block, "delta": delta}, "content_block_delta"
        )

    def _stop_frame(self, out: _Out) -> bytes:
        return frame({"type": "content_block_stop", "index": out.block}, "content_block_stop")

    # -- per-node lifecycle
    def _begin(self, out: _Out) -> bytes:
        if out.kind == "tool":
            node = out.header
            assert isinstance(node, ToolCallNode)
            self._has_tool = True
            return self._open(out, {"type": "tool_use", "id": node.call_id, "name": node.name, "input": {}})
        return b""

    def _text_delta(self, out: _Out, text: str) -> bytes:
        if not text:
            return b""
        head = b""
        if out.kind == "text":
            if out.block is None:
                head = self._open(out, {"type": "text", "text": ""})
            append_text(out, "streamed", text)
            return head + self._delta_frame(out, {"type": "text_delta", "text": text})
        if out.block is None:
            head = self._open(out, {"type": "thinking", "thinking": "", "signature": ""})
        append_text(out, "streamed", text)
        return head + self._delta_frame(out, {"type": "thinking_delta", "thinking": text})

    def _delta(self, out: _Out, event: NodeDelta) -> bytes:
        kind = out.kind
        if kind == "text" and event.kind in (ev.TEXT, ev.REFUSAL):
            return self._text_delta(out, event.delta)
        if kind == "thinking" and event.kind in (ev.REASONING_SUMMARY, ev.REASONING_CONTENT):
            if out.rkind is None:
                out.rkind = event.kind
            if event.kind != out.rkind:
                return b""  # render one text per block: whichever of content/summary came first
            return self._text_delta(out, event.delta)
        if kind == "thinking" and event.kind == ev.REASONING_ENCRYPTED:
            out.encrypted += event.delta
            return b""
        if kind == "tool" and event.kind == ev.ARGUMENTS and event.delta:
            append_text(out, "streamed", event.delta)
            return self._delta_frame(out, {"type": "input_json_delta", "partial_json": event.delta})
        return b""

    def _close(self, out: _Out, node: Node) -> bytes:
        out.done = True
        parts: list[bytes] = []
        kind = out.kind
        if kind == "text":
            full = node.content if isinstance(node, TextNode | RefusalNode) else out.streamed
            if full.startswith(out.streamed):
                parts.append(self._text_delta(out, full[len(out.streamed) :]))
            citations = node.extra.get("citations") if self.extras else None
            if out.block is not None and isinstance(citations, list) and "citations" not in out.header.extra:
                # Upstream citations_delta events were folded into the node; replay them in the block.
                for citation in citations:
                    parts.append(self._delta_frame(out, {"type": "citations_delta", "citation": citation}))
        elif kind == "thinking" and isinstance(node, ReasoningNode):
            if out.rkind == ev.REASONING_SUMMARY:
                full = node.summary or ""
            elif out.rkind == ev.REASONING_CONTENT:
                full = node.content or ""
            else:
                full = node.content or node.summary or ""
            if full.startswith(out.streamed):
                parts.append(self._text_delta(out, full[len(out.streamed) :]))
            sig = client_signature(node)
            if sig and sig == out.signed:
                sig = None  # written when the block was parked
            if sig:
                if out.block is None:
                    parts.append(self._open(out, {"type": "thinking", "thinking": "", "signature": ""}))
                parts.append(self._delta_frame(out, {"type": "signature_delta", "signature": sig}))
        elif kind == "redacted" and isinstance(node, ReasoningNode):
            if isinstance(node.encrypted, str) and node.encrypted:
                parts.append(self._open(out, {"type": "redacted_thinking", "data": node.encrypted}))
        elif kind == "tool" and isinstance(node, ToolCallNode):
            full = node.arguments
            if not out.streamed and not full:
                full = "{}"
            if full.startswith(out.streamed) and len(full) > len(out.streamed):
                rest = full[len(out.streamed) :]
                out.streamed = full
                parts.append(self._delta_frame(out, {"type": "input_json_delta", "partial_json": rest}))
        elif kind == "item" and isinstance(node, ProviderItemNode):
            parts.append(self._open(out, scrub(dict(node.body))))
        if out.block is not None:
            parts.append(self._stop_frame(out))
        return b"".join(parts)

    def _advance(self) -> bytes:
        parts: list[bytes] = []
        while self._active is None and self._queue:
            out = self._queue.pop(0)
            self._active = out
            parts.append(self._begin(out))
            for what, payload in out.buffer:
                if what == "delta":
                    parts.append(self._delta(out, payload))
                else:
                    parts.append(self._close(out, payload))
                    self._active = None
            out.buffer = []
        return b"".join(parts)

    def _node_done(self, out: _Out, node: Node) -> bytes:
        if out is self._active:
            data = self._close(out, node)
            self._active = None
            return data + self._advance()
        out.buffer.append(("done", node))
        return b""

    def _fallback(self, out: _Out, output: list[Node]) -> Node:
        """The complete node for a block the stream never finished: the authoritative output
        entry when it is the same kind of node, else what was streamed."""
        if 0 <= out.index < len(output) and type(output[out.index]) is type(out.header):
            return output[out.index]
        node = copy(out.header)
        if isinstance(node, TextNode | RefusalNode):
            node.content = out.streamed
        elif isinstance(node, ToolCallNode):
            node.arguments = out.streamed
        elif isinstance(node, ReasoningNode):
            node.summary = out.streamed
        return node

    # -- public API
    def _visible(self, out: _Out, event: NodeDelta) -> bool:
        if not event.delta:
            return False
        if out.kind == "text":
            return event.kind in (ev.TEXT, ev.REFUSAL)
        if out.kind == "thinking":
            return event.kind in (ev.REASONING_SUMMARY, ev.REASONING_CONTENT)
        return out.kind == "tool" and event.kind == ev.ARGUMENTS

    def _park(self, out: _Out) -> bytes:
        data = b""
        if out.block is not None and out.kind == "thinking" and out.encrypted:
            # The payload is already known (Chat sends it whole, right after the text): sign this
            # block now rather than open a second, empty thinking block just for the signature.
            sig = client_signature(replace(out.header, encrypted=out.encrypted))
            if sig:
                out.signed = sig
                data = self._delta_frame(out, {"type": "signature_delta", "signature": sig})
        data += self._stop_frame(out) if out.block is not None else b""
        out.block = None
        out.parked = True
        self._active = None
        return data

    def _preempt_until(self, target: _Out) -> bytes:
        """A queued node has visible content while an earlier text/thinking block is still open
        (decoders such as Chat's finish every node only at the end): close the earlier block now
        so the stream stays incremental. If the earlier node continues later it gets a new block
        (a thinking continuation may be just its signature). Tool blocks are never split."""
        parts: list[bytes] = []
        while target in self._queue:
            active = self._active
            if active is not None:
                if active.kind not in ("text", "thinking"):
                    break
                parts.append(self._park(active))
            parts.append(self._advance())
        return b"".join(parts)

    def _requeue(self, out: _Out) -> None:
        out.parked = False
        self._queue.append(out)

    def encode(self, event: Any) -> bytes:
        if self.finished:
            return b""
        if isinstance(event, NodeDelta):
            out = self._outs.get(event.index)
            if out is None or out.kind == "skip" or out.done:
                return b""
            if out is self._active:
                return self._delta(out, event)
            out.buffer.append(("delta", event))
            if out.parked:
                self._requeue(out)
            if self._visible(out, event):
                return self._preempt_until(out)
            return self._advance()
        if isinstance(event, NodeStart):
            head = b"" if self.started else self._message_start(None)
            out = _Out(event.index, _classify(event.node), event.node)
            self._outs[event.index] = out
            self._max_index = max(self._max_index, event.index)
            if out.kind == "skip":
                return head
            if self._active is None and not self._queue:
                self._active = out
                return head + self._begin(out)
            self._queue.append(out)
            return head
        if isinstance(event, NodeDone):
            out = self._outs.get(event.index)
            if out is None or out.kind == "skip" or out.done:
                return b""
            if out.parked:
                out.buffer.append(("done", event.node))
                self._requeue(out)
                return self._advance()
            return self._node_done(out, event.node)
        if isinstance(event, ResponseStart):
            return b"" if self.started else self._message_start(event)
        if isinstance(event, ResponseDone):
            return self._terminal(event)
        if isinstance(event, StreamError):
            return self._error_terminal(event.status, event.code, event.message, event.error_type)
        return b""  # ProviderControl: upstream pings are never forwarded; we send our own

    def _terminal(self, done: ResponseDone) -> bytes:
        parts: list[bytes] = [] if self.started else [self._message_start(None)]
        output = done.output
        for out in sorted(self._outs.values(), key=lambda o: o.index):
            if out.parked and not out.done:
                out.buffer.append(("done", self._fallback(out, output)))
                self._requeue(out)
        while self._active is not None or self._queue:
            if self._active is None:
                parts.append(self._advance())
                continue
            parts.append(self._node_done(self._active, self._fallback(self._active, output)))
        for index in range(self._max_index + 1, len(output)):
            node = output[index]
            out = _Out(index, _classify(node), node)
            if out.kind == "skip":
                continue
            parts.append(self._begin(out))
            parts.append(self._close(out, node))
        stop_reason, stop_sequence = stop_to_wire(done.finish_reason, done.extra, has_tool_use=self._has_tool)
        usage = encode_usage(done.usage, same_family=self.same)
        parts.append(
            frame(
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop_reason, "stop_sequence": stop_sequence},
                    "usage": usage,
                },
                "message_delta",
            )
        )
        parts.append(frame({"type": "message_stop"}, "message_stop"))
        self.finished = True
        return b"".join(parts)

    def _error_terminal(
        self, status: int | None, code: str | None, message: str, error_type: str | None
    ) -> bytes:
        head = b"" if self.started else self._message_start(None)
        self.finished = True
        err = {"type": "error", "error": error_object(status or 500, code, message, error_type)}
        return head + frame(err, "error")

    def keepalive(self) -> bytes:
        return _PING

    def error(self, status: int, code: str, message: str) -> bytes:
        """Pre-stream error: a lone ``event: error`` (no message_start, no [DONE])."""
        self.finished = True
        err = {"type": "error", "error": error_object(status, code, message)}
        return frame(err, "error")

    def close(self) -> bytes:
        if self.finished:
            return b""
        return self._error_terminal(
            502, "upstream_stream_incomplete", "upstream stream ended without a terminal event", None
        )
