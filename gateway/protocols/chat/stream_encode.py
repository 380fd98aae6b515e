"""Chat Completions streaming encoder: URP events -> client SSE (reference §4.7).

Data-only frames, role chunk first, one kind of delta per chunk (never content and tool_calls
together), exactly one finish chunk after the last delta, the usage chunk (when the client asked)
right before the single ``[DONE]``. It is incremental: it keeps only per-node counters, never
the stream.
"""

from __future__ import annotations

import time
from typing import Any

import orjson

from gateway.urp import (
    Node,
    ReasoningNode,
    RefusalNode,
    TextNode,
    ToolCallNode,
)
from gateway.urp import events as ev
from gateway.urp.presentation import INJECT_REASONING_CONTENT, SUMMARY_AS_CHAT_CONTENT

from ..base import EncodeContext
from ..sse import DONE
from .common import (
    CHOICE_EXTRA,
    LEGACY_FUNCTION,
    NATIVE_FINISH,
    PROTOCOL,
    REASONING_DETAIL,
    REASONING_SURFACE,
    chat_id,
    default_error_type,
    encode_usage,
    finish_to_wire,
    raw_details,
)


def _marked(extra: dict[str, Any]) -> bool:
    return INJECT_REASONING_CONTENT in extra or SUMMARY_AS_CHAT_CONTENT in extra


class _NodeState:
    __slots__ = ("kind", "sent", "sent_summary", "wire", "surface", "ident", "custom", "legacy")

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.sent = 0  # characters of content/arguments already written
        self.sent_summary = 0
        self.wire = 0  # tool-call index on the wire
        self.surface: str | None = None
        self.ident: dict[str, Any] = {}
        self.custom = False
        self.legacy = False


class StreamEncoder:
    """URP events -> client Chat Completions SSE."""

    fast_text = True  # the plain text-delta shortcut in ``encode`` (tests turn it off to compare)

    def __init__(self, ctx: EncodeContext) -> None:
        self.ctx = ctx
        self._same = ctx.source_protocol in (None, PROTOCOL)
        self._id = chat_id(None)
        self._created = int(time.time())
        self._started = False
        self._terminal = False
        self._states: dict[int, _NodeState] = {}
        self._calls = 0
        self._legacy = False
        self._detail_index = 0
        self._call_ids: set[str] = set()
        self._choice_extra: dict[str, Any] | None = None
        # A plain text delta's frame around its JSON string (``_text_frame``), for this id,
        # created and model: (key, head, tail)
        self._text_parts: tuple[tuple[str, int, str], bytes, bytes] | None = None

    # framing
    def _frame(self, obj: dict[str, Any]) -> bytes:
        return b"data: " + orjson.dumps(obj) + b"\n\n"

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> bytes:
        choice: dict[str, Any] = {"index": 0, "delta": delta, "finish_reason": finish}
        if self._choice_extra:
            for key, value in self._choice_extra.items():
                choice.setdefault(key, value)
        return self._frame(
            {
                "id": self._id,
                "object": "chat.completion.chunk",
                "created": self._created,
                "model": self.ctx.model,
                "choices": [choice],
            }
        )

    def _text_frame(self, text: str) -> bytes:
        """``_chunk({"content": text})`` byte for byte, without building the chunk's dicts: the
        bytes around the JSON string are made once (per id, created and model)."""
        key = (self._id, self._created, self.ctx.model)
        parts = self._text_parts
        if parts is None or parts[0] != key:
            whole = self._chunk({"content": ""})
            cut = whole.rindex(b'"content":""') + len(b'"content":')
            parts = self._text_parts = (key, whole[:cut], whole[cut + 2 :])
        return parts[1] + orjson.dumps(text) + parts[2]

    def _ensure_started(self) -> bytes:
        if self._started:
            return b""
        self._started = True
        return self._chunk({"role": "assistant", "content": ""})

    # node lifecycle
    def _open(self, idx: int, node: Node) -> bytes:
        if isinstance(node, TextNode):
            state = _NodeState("text")
        elif isinstance(node, RefusalNode):
            state = _NodeState("refusal")
        elif isinstance(node, ReasoningNode):
            state = _NodeState("reasoning")
            surface = node.extra.get(REASONING_SURFACE)
            state.surface = surface if surface in ("reasoning", "reasoning_content") else None
            raw = next(iter(raw_details(node.extra.get(REASONING_DETAIL))), None)
            if node.id:
                state.ident["id"] = node.id
            if node.source:
                state.ident["format"] = node.source
            elif isinstance(raw, dict) and isinstance(raw.get("format"), str):
                state.ident["format"] = raw["format"]
        elif isinstance(node, ToolCallNode):
            state = _NodeState("call")
            self._states[idx] = state
            self._call_ids.add(node.call_id)
            if self._same and node.extra.get(LEGACY_FUNCTION):
                state.legacy = True
                self._legacy = True
                return self._chunk({"function_call": {"name": node.name, "arguments": ""}})
            state.wire = self._calls
            self._calls += 1
            if node.tool_type == "custom":
                state.custom = True
                head = {
                    "index": state.wire,
                    "id": node.call_id,
                    "type": "custom",
                    "custom": {"name": node.name, "input": ""},
                }
            else:
                head = {
                    "index": state.wire,
                    "id": node.call_id,
                    "type": "function",
                    "function": {"name": node.name, "arguments": ""},
                }
            return self._chunk({"tool_calls": [head]})
        else:
            state = _NodeState("skip")
        self._states[idx] = state
        return b""

    def _reasoning_entry(self, state: _NodeState, dtype: str, field: str, value: Any) -> dict[str, Any]:
        if "index" not in state.ident:
            state.ident["index"] = self._detail_index
            self._detail_index += 1
        return {"type": dtype, field: value, **state.ident}

    def _write(self, state: _NodeState, kind: str, text: str) -> bytes:
        if not text:
            return b""
        if state.kind == "text" and kind == ev.TEXT:
            state.sent += len(text)
            return self._chunk({"content": text})
        if state.kind == "refusal" and kind == ev.REFUSAL:
            state.sent += len(text)
            return self._chunk({"refusal": text})
        if state.kind == "call" and kind == ev.ARGUMENTS:
            state.sent += len(text)
            if state.legacy:
                return self._chunk({"function_call": {"arguments": text}})
            if state.custom:
                return self._chunk({"tool_calls": [{"index": state.wire, "custom": {"input": text}}]})
            return self._chunk({"tool_calls": [{"index": state.wire, "function": {"arguments": text}}]})
        if state.kind == "reasoning":
            if kind == ev.REASONING_CONTENT:
                state.sent += len(text)
                if state.surface:
                    return self._chunk({state.surface: text})
                entry = self._reasoning_entry(state, "reasoning.text", "text", text)
                return self._chunk({"reasoning": text, "reasoning_details": [entry]})
            if kind == ev.REASONING_SUMMARY:
                state.sent_summary += len(text)
                entry = self._reasoning_entry(state, "reasoning.summary", "summary", text)
                return self._chunk({"reasoning_details": [entry]})
            # encrypted fragments are written once, whole, when the node completes
        return b""

    def _write_marked(self, state: _NodeState, event: ev.NodeDelta) -> bytes:
        """A reasoning delta marked by a presentation transform: a summary shown as
        ``reasoning_content`` instead of a detail, or ``reasoning_content`` added next to the
        normal fields."""
        text = event.delta
        if event.kind == ev.REASONING_SUMMARY and event.extra.get(SUMMARY_AS_CHAT_CONTENT):
            state.sent_summary += len(text)
            return self._chunk({"reasoning_content": text})
        if (
            event.kind not in (ev.REASONING_CONTENT, ev.REASONING_SUMMARY)
            or not event.extra.get(INJECT_REASONING_CONTENT)
            or (event.kind == ev.REASONING_CONTENT and state.surface)
        ):
            return self._write(state, event.kind, text)
        if event.kind == ev.REASONING_CONTENT:
            state.sent += len(text)
            entry = self._reasoning_entry(state, "reasoning.text", "text", text)
            return self._chunk({"reasoning": text, "reasoning_content": text, "reasoning_details": [entry]})
        state.sent_summary += len(text)
        entry = self._reasoning_entry(state, "reasoning.summary", "summary", text)
        return self._chunk({"reasoning_content": text, "reasoning_details": [entry]})

    def _finish_node(self, state: _NodeState, node: Node) -> bytes:
        """Write whatever of the complete node was not streamed (terminal snapshots)."""
        out = b""
        if state.kind in ("text", "refusal") and isinstance(node, TextNode | RefusalNode):
            out += self._write(
                state, ev.TEXT if state.kind == "text" else ev.REFUSAL, node.content[state.sent :]
            )
        elif state.kind == "call" and isinstance(node, ToolCallNode):
            out += self._write(state, ev.ARGUMENTS, node.arguments[state.sent :])
        elif state.kind == "reasoning" and isinstance(node, ReasoningNode):
            if node.content:
                out += self._write(state, ev.REASONING_CONTENT, node.content[state.sent :])
            if node.summary:
                out += self._write(state, ev.REASONING_SUMMARY, node.summary[state.sent_summary :])
            if node.encrypted not in (None, ""):
                entry = {"type": "reasoning.encrypted", "data": node.encrypted, **state.ident}
                if "index" not in entry or state.sent or state.sent_summary:  # its own entry, its own index
                    entry["index"] = self._detail_index
                    self._detail_index += 1
                out += self._chunk({"reasoning_details": [entry]})
        state.kind = "closed"
        return out

    def _terminal_frames(self, done: ev.ResponseDone) -> bytes:
        out = b""
        for idx, node in enumerate(done.output):
            state = self._states.get(idx)
            if state is None:
                if isinstance(node, ToolCallNode) and node.call_id in self._call_ids:
                    continue
                out += self._open(idx, node)
                state = self._states[idx]
            if state.kind != "closed":
                out += self._finish_node(state, node)
        finish = finish_to_wire(
            done.finish_reason,
            done.extra.get(NATIVE_FINISH),
            has_tool_calls=self._calls > 0 or self._legacy,
            legacy=self._legacy and self._calls == 0,
        )
        out += self._chunk({}, finish)
        if self.ctx.include_usage and done.usage is not None:
            out += self._frame(
                {
                    "id": self._id,
                    "object": "chat.completion.chunk",
                    "created": self._created,
                    "model": self.ctx.model,
                    "choices": [],
                    "usage": encode_usage(done.usage, same_protocol=self._same),
                }
            )
        return out + DONE

    def _error_frames(
        self,
        status: int | None,
        code: str | None,
        message: str,
        error_type: str | None,
        param: str | None = None,
    ) -> bytes:
        err = {
            "message": message,
            "type": error_type or default_error_type(status or 500),
            "param": param,
            "code": code,
        }
        return self._frame({"error": err}) + DONE

    # public API
    def encode(self, event: ev.Event) -> bytes:
        if isinstance(event, ev.NodeDelta) and self._started and not self._terminal and self.fast_text:
            # the common event: a plain text delta of an open text node (``_write``, same bytes)
            state = self._states.get(event.index)
            text = event.delta
            if state is not None and state.kind == "text" and event.kind == ev.TEXT and text:
                if not event.extra and self._choice_extra is None:
                    state.sent += len(text)
                    return self._text_frame(text)
        if self._terminal:
            return b""
        if isinstance(event, ev.ResponseStart):
            if self._same and event.id and event.id.startswith("chatcmpl"):
                self._id = event.id
            if self._same and event.created:
                self._created = event.created
            return self._ensure_started()
        if isinstance(event, ev.StreamError):
            self._terminal = True
            raw = event.extra.get("error") if self._same else None
            if isinstance(raw, dict):
                err = {k: v for k, v in raw.items() if not str(k).startswith("_gw_")}
                err.setdefault("message", event.message)
                err.setdefault("type", event.error_type or default_error_type(event.status or 500))
                err.setdefault("param", None)
                err.setdefault("code", event.code)
                return self._ensure_started() + self._frame({"error": err}) + DONE
            return self._ensure_started() + self._error_frames(
                event.status, event.code, event.message, event.error_type
            )
        if isinstance(event, ev.ProviderControl):
            return b""
        out = self._ensure_started()
        if isinstance(event, ev.NodeStart):
            if event.index not in self._states:
                out += self._open(event.index, event.node)
        elif isinstance(event, ev.NodeDelta):
            state = self._states.get(event.index)
            if state is not None:
                extra = event.extra.get(CHOICE_EXTRA) if self._same and event.extra else None
                if isinstance(extra, dict):
                    self._choice_extra = extra
                if event.extra and state.kind == "reasoning" and event.delta and _marked(event.extra):
                    out += self._write_marked(state, event)
                else:
                    out += self._write(state, event.kind, event.delta)
                self._choice_extra = None
        elif isinstance(event, ev.NodeDone):
            state = self._states.get(event.index)
            if state is None:
                out += self._open(event.index, event.node)
                state = self._states[event.index]
            if state.kind != "closed":
                out += self._finish_node(state, event.node)
        elif isinstance(event, ev.ResponseDone):
            self._terminal = True
            out += self._terminal_frames(event)
        return out

    def keepalive(self) -> bytes:
        return b":heartbeat\n\n"

    def error(self, status: int, code: str, message: str) -> bytes:
        """Pre-stream error: one error chunk then ``[DONE]`` (HTTP status stays 200)."""
        self._terminal = True
        return self._error_frames(status, code, message, None)

    def close(self) -> bytes:
        if self._terminal:
            return b""
        self._terminal = True
        return self._ensure_started() + self._error_frames(
            502, "upstream_stream_incomplete", "The upstream stream ended before it completed.", "api_error"
        )
