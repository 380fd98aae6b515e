"""Anthropic Messages streaming decoder: upstream SSE -> canonical events (reference §4.5)."""

from __future__ import annotations

from copy import copy
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
    ResponseDone,
    ResponseStart,
    StreamError,
    TextNode,
    ToolCallNode,
)
from gateway.urp import events as ev
from gateway.urp.accumulate import apply_delta
from gateway.urp.nodes import INTERNAL_PREFIX

from ..base import json_text, new_id
from ..json_depth import too_deep
from .common import (
    PROTOCOL,
    REASONING_KIND,
    START_USAGE,
    STOP_REASON,
    STOP_SEQUENCE,
    THINKING_FROM_MESSAGES,
    decode_usage,
    finish_from_wire,
    scrub,
    unknown,
)

_MESSAGE_KNOWN = frozenset(
    {"id", "type", "role", "model", "content", "stop_reason", "stop_sequence", "usage"}
)
_SUMMARY_MARK = {THINKING_FROM_MESSAGES: True}


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
                node.arguments = json_text(
                    slot.fallback_input if isinstance(slot.fallback_input, dict) else {}
                )
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
        out.append(
            ResponseDone(
                output=output,
                finish_reason=finish,
                usage=decode_usage(self._usage) if self._usage else None,
                extra=extra,
            )
        )
        self.finished = True
        return out

    # -- event handlers
    def _block_start(self, payload: dict[str, Any]) -> list:
        out = self._start(None)
        widx, cb = payload.get("index"), payload.get("content_block")
        if not isinstance(widx, int) or not isinstance(cb, dict):
            return out + self._fail(
                "content_block_start without index or content_block", "invalid_upstream_response"
            )
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
            node = ToolCallNode(
                call_id=str(cb.get("id") or new_id("toolu_")),
                name=str(cb.get("name") or ""),
                extra=unknown(cb, frozenset({"type", "id", "name", "input"})),
            )
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
            return (
                self._apply(slot, ev.REASONING_SUMMARY, text, _SUMMARY_MARK)
                if isinstance(text, str) and text
                else []
            )
        if dtype == "signature_delta" and slot.kind == "thinking":
            sig = delta.get("signature")
            return (
                self._apply(slot, ev.REASONING_ENCRYPTED, sig, None) if isinstance(sig, str) and sig else []
            )
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
            return self._fail(
                str(err.get("message") or "upstream stream error"),
                etype_ or "upstream_error",
                etype_,
                raw=err,
            )
        return []

    def close(self) -> list:
        if self.finished:
            return []
        return self._fail("upstream stream ended without a terminal event", "upstream_stream_incomplete")
