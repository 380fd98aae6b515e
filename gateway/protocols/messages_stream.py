"""Anthropic Messages streaming: upstream SSE -> canonical events (``StreamDecoder``) and
canonical events -> client SSE (``StreamEncoder``), reference §4.5 and §4.8."""

from __future__ import annotations

from copy import copy
from dataclasses import replace
from typing import Any

import orjson

from gateway.urp import (
    Node,
    NodeDelta,
    NodeDone,
    NodeStart,
    ProviderControl,
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
from gateway.urp.accumulate import apply_delta
from gateway.urp.nodes import INTERNAL_PREFIX

from .base import EncodeContext, json_text, new_id, put_extra
from .json_depth import too_deep
from .messages_common import (
    PROTOCOL,
    REASONING_KIND,
    START_USAGE,
    STOP_REASON,
    STOP_SEQUENCE,
    THINKING_FROM_MESSAGES,
    client_signature,
    decode_usage,
    encode_usage,
    error_object,
    finish_from_wire,
    scrub,
    stop_to_wire,
    unknown,
)
from .sse import frame

_MESSAGE_KNOWN = frozenset({"id", "type", "role", "model", "content", "stop_reason", "stop_sequence", "usage"})
_SUMMARY_MARK = {THINKING_FROM_MESSAGES: True}


# == decoder ===================================================================================

class _Slot:
    """One upstream content block being reconstructed."""

    __slots__ = ("index", "kind", "node", "parts", "fallback_input")

    def __init__(self, index: int, kind: str, node: Node) -> None:
        self.index = index
        self.kind = kind  # text | thinking | redacted | tool | item
        self.node = node
        self.parts: list[str] = []
        self.fallback_input: Any = None


class StreamDecoder:
    """Messages upstream SSE -> canonical events. Usage counters are merged across
    ``message_start`` and every ``message_delta`` (cumulative; null keeps the previous value); the
    first non-empty ``stop_reason`` is terminal evidence and ends the stream right away, so relays
    that never send ``message_stop`` still complete."""

    def __init__(self) -> None:
        self.finished = False
        self._started = False
        self._id = ""
        self._model = ""
        self._slots: dict[int, _Slot] = {}
        self._nodes: list[Node] = []
        self._open: set[int] = set()
        self._usage: dict[str, Any] = {}
        self._stop_reason: str | None = None
        self._stop_sequence: Any = None
        self._extra: dict[str, Any] = {}

    # -- helpers
    def _fail(self, message: str, code: str, error_type: str | None = None, raw: Any = None) -> list:
        self.finished = True
        extra = {"raw": raw} if raw is not None else {}
        return [StreamError(message=message, code=code, error_type=error_type, extra=extra)]

    def _start(self, msg: dict[str, Any] | None) -> list:
        if self._started:
            return []
        self._started = True
        msg = msg or {}
        self._id = msg.get("id") if isinstance(msg.get("id"), str) else new_id("msg_")
        self._model = msg.get("model") if isinstance(msg.get("model"), str) else ""
        extra = unknown(msg, _MESSAGE_KNOWN)
        self._extra.update(extra)
        start_extra = dict(extra)
        usage = msg.get("usage")
        if isinstance(usage, dict):
            self._merge_usage(usage)
            start_extra[START_USAGE] = decode_usage(usage)
        return [ResponseStart(id=self._id, model=self._model, extra=start_extra)]

    def _merge_usage(self, usage: dict[str, Any]) -> None:
        for k, v in usage.items():
            if v is not None and not k.startswith(INTERNAL_PREFIX):
                self._usage[k] = v

    def _close_slot(self, slot: _Slot) -> list:
        if slot.index not in self._open:
            return []
        self._open.discard(slot.index)
        node = slot.node
        if slot.kind == "tool":
            assert isinstance(node, ToolCallNode)
            if not slot.parts:
                node.arguments = json_text(slot.fallback_input if isinstance(slot.fallback_input, dict) else {})
        elif slot.kind == "item" and slot.parts:
            assert isinstance(node, ProviderItemNode)
            text = "".join(slot.parts)
            try:
                value = orjson.loads(text)
            except orjson.JSONDecodeError:
                value = text
            # fragments may add up to JSON nested deeper than any encoder could write back
            node.body["input"] = text if too_deep(value, text) else value
        self._nodes[slot.index] = node
        done = copy(node)
        return [NodeDone(index=slot.index, node=done)]

    def _finish(self) -> list:
        out: list = []
        for slot in sorted(self._slots.values(), key=lambda s: s.index):
            out.extend(self._close_slot(slot))
        output = list(self._nodes)
        finish = finish_from_wire(self._stop_reason)
        if finish is None:
            finish = "tool_calls" if any(isinstance(n, ToolCallNode) for n in output) else "stop"
        extra = dict(self._extra)
        if self._stop_reason:
            extra[STOP_REASON] = self._stop_reason
            extra[STOP_SEQUENCE] = self._stop_sequence
        out.append(ResponseDone(output=output, finish_reason=finish, usage=decode_usage(self._usage) if self._usage
                                else None, extra=extra))
        self.finished = True
        return out

    # -- event handlers
    def _block_start(self, payload: dict[str, Any]) -> list:
        out = self._start(None)
        widx, cb = payload.get("index"), payload.get("content_block")
        if not isinstance(widx, int) or not isinstance(cb, dict):
            return out + self._fail("content_block_start without index or content_block", "invalid_upstream_response")
        if widx in self._slots:
            # A reused wire index: close the previous block first so node invariants hold.
            out.extend(self._close_slot(self._slots[widx]))
        index = len(self._nodes)
        btype = cb.get("type")
        deltas: list[tuple[str, str, dict[str, Any] | None]] = []
        if btype == "text":
            node: Node = TextNode(role="assistant", extra=unknown(cb, frozenset({"type", "text"})))
            slot = _Slot(index, "text", node)
            if isinstance(cb.get("text"), str) and cb["text"]:
                deltas.append((ev.TEXT, cb["text"], None))
        elif btype == "thinking":
            node = ReasoningNode(summary="", extra=unknown(cb, frozenset({"type", "thinking", "signature"})))
            slot = _Slot(index, "thinking", node)
            if isinstance(cb.get("thinking"), str) and cb["thinking"]:
                deltas.append((ev.REASONING_SUMMARY, cb["thinking"], _SUMMARY_MARK))
            if isinstance(cb.get("signature"), str) and cb["signature"]:
                deltas.append((ev.REASONING_ENCRYPTED, cb["signature"], None))
        elif btype == "redacted_thinking":
            extra = unknown(cb, frozenset({"type", "data"}))
            extra[REASONING_KIND] = "redacted_thinking"
            node = ReasoningNode(extra=extra)
            slot = _Slot(index, "redacted", node)
            if isinstance(cb.get("data"), str):
                deltas.append((ev.REASONING_ENCRYPTED, cb["data"], None))
        elif btype == "tool_use":
            node = ToolCallNode(call_id=str(cb.get("id") or new_id("toolu_")), name=str(cb.get("name") or ""),
                                extra=unknown(cb, frozenset({"type", "id", "name", "input"})))
            slot = _Slot(index, "tool", node)
            slot.fallback_input = cb.get("input")
        else:
            node = ProviderItemNode(origin_protocol=PROTOCOL, item_type=str(btype), body=scrub(dict(cb)))
            slot = _Slot(index, "item", node)
        self._slots[widx] = slot
        self._nodes.append(node)
        self._open.add(index)
        header = copy(node)
        header.extra = dict(node.extra)  # the working node keeps growing; the header must not
        out.append(NodeStart(index=index, node=header))
        for kind, text, mark in deltas:
            out.extend(self._apply(slot, kind, text, mark))
        return out

    def _apply(self, slot: _Slot, kind: str, text: str, mark: dict[str, Any] | None) -> list:
        apply_delta(slot.node, kind, text)
        if kind == ev.ARGUMENTS and isinstance(slot.node, ToolCallNode):
            slot.parts.append(text)
        return [NodeDelta(index=slot.index, kind=kind, delta=text, extra=dict(mark) if mark else {})]

    def _slot_of(self, payload: dict[str, Any]) -> _Slot | None:
        """The open block a delta/stop event names; None for a missing or non-integer index."""
        widx = payload.get("index")
        return self._slots.get(widx) if isinstance(widx, int) else None

    def _block_delta(self, payload: dict[str, Any]) -> list:
        slot = self._slot_of(payload)
        delta = payload.get("delta")
        if slot is None or slot.index not in self._open or not isinstance(delta, dict):
            return []
        dtype = delta.get("type")
        if dtype == "text_delta" and slot.kind == "text":
            text = delta.get("text")
            return self._apply(slot, ev.TEXT, text, None) if isinstance(text, str) and text else []
        if dtype == "thinking_delta" and slot.kind == "thinking":
            text = delta.get("thinking")
            return self._apply(slot, ev.REASONING_SUMMARY, text, _SUMMARY_MARK) if isinstance(text, str) and text else []
        if dtype == "signature_delta" and slot.kind == "thinking":
            sig = delta.get("signature")
            return self._apply(slot, ev.REASONING_ENCRYPTED, sig, None) if isinstance(sig, str) and sig else []
        if dtype == "input_json_delta":
            part = delta.get("partial_json")
            if not isinstance(part, str) or not part:
                return []
            if slot.kind == "tool":
                return self._apply(slot, ev.ARGUMENTS, part, None)
            if slot.kind == "item":
                slot.parts.append(part)
            return []
        if dtype == "citations_delta" and slot.kind == "text" and isinstance(delta.get("citation"), dict):
            slot.node.extra.setdefault("citations", []).append(delta["citation"])
        return []

    def feed(self, event_name: str | None, data: str) -> list:
        if self.finished:
            return []
        if data.strip() == "[DONE]":
            if not self._started:
                return self._fail("upstream stream ended before message_start", "upstream_stream_incomplete")
            return self._finish()
        try:
            payload = orjson.loads(data)
        except orjson.JSONDecodeError:
            return self._fail("upstream sent invalid JSON in a stream event", "invalid_upstream_response")
        if not isinstance(payload, dict):
            return self._fail("upstream stream event is not an object", "invalid_upstream_response")
        if too_deep(payload, data):
            return self._fail("upstream stream event is nested too deeply", "invalid_upstream_response")
        etype = payload.get("type") or event_name
        if etype == "content_block_delta":
            return self._block_delta(payload)
        if etype == "content_block_start":
            return self._block_start(payload)
        if etype == "content_block_stop":
            slot = self._slot_of(payload)
            return self._close_slot(slot) if slot is not None else []
        if etype == "message_start":
            msg = payload.get("message")
            return self._start(msg if isinstance(msg, dict) else None)
        if etype == "message_delta":
            out = self._start(None)
            usage = payload.get("usage")
            if isinstance(usage, dict):
                self._merge_usage(usage)
            delta = payload.get("delta")
            if isinstance(delta, dict):
                reason = delta.get("stop_reason")
                if "stop_sequence" in delta:
                    self._stop_sequence = delta.get("stop_sequence")
                for k, v in delta.items():
                    if k not in ("stop_reason", "stop_sequence") and not k.startswith(INTERNAL_PREFIX):
                        self._extra[k] = v
                if isinstance(reason, str) and reason:
                    self._stop_reason = reason
                    return out + self._finish()
            return out
        if etype == "message_stop":
            return self._start(None) + self._finish()
        if etype == "ping":
            return [ProviderControl(protocol=PROTOCOL, event_name="ping", data=payload)]
        if etype == "error":
            err = payload.get("error") if isinstance(payload.get("error"), dict) else {}
            etype_ = err.get("type") if isinstance(err.get("type"), str) else None
            return self._fail(str(err.get("message") or "upstream stream error"), etype_ or "upstream_error",
                              etype_, raw=err)
        return []

    def close(self) -> list:
        if self.finished:
            return []
        return self._fail("upstream stream ended without a terminal event", "upstream_stream_incomplete")


# == encoder ===================================================================================

class _Out:
    """One URP node on its way to the client: which block type it becomes, whether its block is
    open, what was already streamed, and events buffered while an earlier block is open."""

    __slots__ = ("index", "kind", "header", "block", "streamed", "rkind", "buffer", "done", "parked", "encrypted",
                 "signed")

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
        return frame({"type": "content_block_start", "index": out.block, "content_block": block}, "content_block_start")

    def _delta_frame(self, out: _Out, delta: dict[str, Any]) -> bytes:
        return frame({"type": "content_block_delta", "index": out.block, "delta": delta}, "content_block_delta")

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
            out.streamed += text
            return head + self._delta_frame(out, {"type": "text_delta", "text": text})
        if out.block is None:
            head = self._open(out, {"type": "thinking", "thinking": "", "signature": ""})
        out.streamed += text
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
            out.streamed += event.delta
            return self._delta_frame(out, {"type": "input_json_delta", "partial_json": event.delta})
        return b""

    def _close(self, out: _Out, node: Node) -> bytes:
        out.done = True
        parts: list[bytes] = []
        kind = out.kind
        if kind == "text":
            full = node.content if isinstance(node, TextNode | RefusalNode) else out.streamed
            if full.startswith(out.streamed):
                parts.append(self._text_delta(out, full[len(out.streamed):]))
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
                parts.append(self._text_delta(out, full[len(out.streamed):]))
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
                rest = full[len(out.streamed):]
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
        parts.append(frame({"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": stop_sequence},
                            "usage": usage}, "message_delta"))
        parts.append(frame({"type": "message_stop"}, "message_stop"))
        self.finished = True
        return b"".join(parts)

    def _error_terminal(self, status: int | None, code: str | None, message: str, error_type: str | None) -> bytes:
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
        return self._error_terminal(502, "upstream_stream_incomplete", "upstream stream ended without a terminal event",
                                    None)
