"""Chat Completions streaming: upstream SSE chunks -> URP events, and URP events -> client SSE.

Decoder (reference §4.3): deltas of several nodes may interleave, so every NodeDone is emitted
at the end, followed by ResponseDone with the last usage seen; a ``[DONE]`` or EOF without a
finish_reason is an error, never a synthesised success.

Encoder (reference §4.7): data-only frames, role chunk first, one kind of delta per chunk (never
content and tool_calls together), exactly one finish chunk after the last delta, the usage chunk
(when the client asked) right before the single ``[DONE]``. It is incremental: it keeps only
per-node counters, never the stream.
"""

from __future__ import annotations

import time
from copy import copy
from typing import Any

import orjson

from gateway.urp import (
    Node,
    ProviderItemNode,
    ReasoningNode,
    RefusalNode,
    TextNode,
    ToolCallNode,
)
from gateway.urp import events as ev
from gateway.urp.accumulate import apply_delta

from .base import EncodeContext, new_id
from .chat_common import (
    CHOICE_EXTRA,
    LEGACY_FUNCTION,
    LEGACY_PREFIX,
    NATIVE_FINISH,
    PROTOCOL,
    REASONING_DETAIL,
    REASONING_SURFACE,
    decode_usage,
    encode_usage,
    finish_from_wire,
    finish_to_wire,
    folds_into,
    raw_details,
)
from .chat_encode import chat_id
from .json_depth import too_deep
from .sse import DONE

# -- decoder ------------------------------------------------------------------------------


def _header(node: Node) -> Node:
    """An independent copy for NodeStart, so later accumulation never leaks into it."""
    head = copy(node)
    head.extra = dict(node.extra)
    return head


class StreamDecoder:
    """Upstream Chat SSE -> URP events."""

    def __init__(self) -> None:
        self.finished = False
        self._started = False
        self._nodes: list[Node] = []
        self._text: int | None = None
        self._refusal: int | None = None
        self._scalar: int | None = None
        self._details: dict[Any, int] = {}
        self._raw: dict[int, dict[str, Any]] = {}
        self._folded: dict[int, dict[str, Any]] = {}  # encrypted entries folded into a text node
        self._calls: dict[Any, int] = {}
        self._native_finish: str | None = None
        self._usage = None

    # helpers
    def _start(self, node: Node, out: list[ev.Event]) -> int:
        idx = len(self._nodes)
        self._nodes.append(node)
        out.append(ev.NodeStart(index=idx, node=_header(node)))
        return idx

    def _delta(self, idx: int, kind: str, text: str, out: list[ev.Event]) -> None:
        if not text:
            return
        apply_delta(self._nodes[idx], kind, text)
        out.append(ev.NodeDelta(index=idx, kind=kind, delta=text))

    def _fail(self, message: str, code: str, out: list[ev.Event] | None = None, **kw: Any) -> list[ev.Event]:
        self.finished = True
        out = out if out is not None else []
        out.append(ev.StreamError(message=message, code=code, **kw))
        return out

    def _error(self, err: Any, out: list[ev.Event]) -> list[ev.Event]:
        """An error chunk is terminal. OpenRouter puts the provider's code and type under
        ``metadata`` when the top-level ones are missing."""
        if isinstance(err, dict):
            meta = err.get("metadata") if isinstance(err.get("metadata"), dict) else {}
            code = err.get("code")
            if code is None:
                code = meta.get("provider_code")
            etype = err.get("type") if isinstance(err.get("type"), str) else meta.get("error_type")
            return self._fail(err.get("message") if isinstance(err.get("message"), str) else "upstream error",
                              str(code) if code is not None else "upstream_error", out,
                              error_type=etype if isinstance(etype, str) else None,
                              status=code if isinstance(code, int) else None, extra={"error": err})
        return self._fail(str(err), "upstream_error", out)

    def _snapshot(self, msg: dict[str, Any], out: list[ev.Event]) -> None:
        """A terminal ``choices[0].message`` snapshot (some providers send one) fills only what
        the deltas missed: a text suffix and tool calls never streamed."""
        content = msg.get("content")
        if isinstance(content, str) and content:
            have = self._nodes[self._text].content if self._text is not None else ""  # type: ignore[union-attr]
            if content.startswith(have) and len(content) > len(have):
                if self._text is None:
                    self._text = self._start(TextNode(role="assistant"), out)
                self._delta(self._text, ev.TEXT, content[len(have):], out)
        seen = {n.call_id for n in self._nodes if isinstance(n, ToolCallNode)}
        for pos, tc in enumerate(msg.get("tool_calls") or []):
            if isinstance(tc, dict) and tc.get("id") and tc["id"] not in seen:
                self._tool_call(("snapshot", pos), {k: v for k, v in tc.items() if k != "index"}, out)

    def _complete(self) -> list[ev.Event]:
        self.finished = True
        out: list[ev.Event] = []
        for idx, raw in self._raw.items():
            folded = self._folded.get(idx)
            self._nodes[idx].extra[REASONING_DETAIL] = raw if folded is None else [raw, folded]
        for idx, node in enumerate(self._nodes):
            out.append(ev.NodeDone(index=idx, node=node))
        extra = {NATIVE_FINISH: self._native_finish} if self._native_finish else {}
        out.append(ev.ResponseDone(output=list(self._nodes), finish_reason=finish_from_wire(self._native_finish),
                                   usage=self._usage, extra=extra))
        return out

    # delta handling
    def _reasoning_detail(self, entry: dict[str, Any], out: list[ev.Event]) -> None:
        # Upstream data: only string types, integer indexes and string ids make an entry's key.
        dtype = entry.get("type") if isinstance(entry.get("type"), str) else None
        windex, wid = entry.get("index"), entry.get("id")
        if isinstance(windex, int):
            key: Any = (dtype, "i", windex)
        elif isinstance(wid, str) and wid:
            key = (dtype, "id", wid)
        else:
            key = None
        idx = self._details.get(key) if key is not None else None
        if idx is None and self._nodes and self._nodes[-1] is not None:
            last = len(self._nodes) - 1
            if folds_into(self._raw.get(last), self._nodes[last], entry):
                # the encrypted payload of the text entry just before: one node (chat_common.folds_into)
                idx = last
                folded = {k: v for k, v in entry.items() if not str(k).startswith("_gw_")}
                self._folded[idx] = folded
                if key is not None:
                    self._details[key] = idx
                self._delta(idx, ev.REASONING_ENCRYPTED, entry["data"], out)
                return
        if idx is None:
            node = ReasoningNode(id=entry.get("id") if isinstance(entry.get("id"), str) else None,
                                 source=entry.get("format") or None if isinstance(entry.get("format"), str) else None)
            idx = self._start(node, out)
            if key is not None:
                self._details[key] = idx
            self._raw[idx] = {k: v for k, v in entry.items() if not str(k).startswith("_gw_")}
        else:
            raw = self._folded[idx] if dtype == "reasoning.encrypted" and idx in self._folded else self._raw[idx]
            for k, v in entry.items():
                if str(k).startswith("_gw_"):
                    continue
                if k in ("text", "summary") and isinstance(v, str) and isinstance(raw.get(k), str):
                    raw[k] += v
                elif v is not None:
                    raw[k] = v
        text, summary = entry.get("text"), entry.get("summary")
        if dtype == "reasoning.text":
            self._delta(idx, ev.REASONING_CONTENT, text if isinstance(text, str) else "", out)
            if isinstance(entry.get("signature"), str):
                self._delta(idx, ev.REASONING_ENCRYPTED, entry["signature"], out)
        elif dtype == "reasoning.summary":
            self._delta(idx, ev.REASONING_SUMMARY, summary if isinstance(summary, str) else "", out)
        elif dtype == "reasoning.encrypted" and isinstance(entry.get("data"), str):
            self._delta(idx, ev.REASONING_ENCRYPTED, entry["data"], out)

    def _tool_call(self, pos: Any, tc: dict[str, Any], out: list[ev.Event]) -> None:
        key = tc.get("index", pos)
        if not isinstance(key, int):  # a garbage index: fall back to the position in the array
            key = pos
        ctype = tc.get("type")
        inner = tc.get("custom") if ctype == "custom" or "custom" in tc else tc.get("function")
        inner = inner if isinstance(inner, dict) else {}
        custom = ctype == "custom" or "custom" in tc
        idx = self._calls.get(key)
        if idx is None:
            name = inner.get("name") if isinstance(inner.get("name"), str) else ""
            call_id = tc.get("id") if isinstance(tc.get("id"), str) and tc["id"] else new_id("call_")
            idx = self._start(ToolCallNode(call_id=call_id, name=name, tool_type="custom" if custom else "function"),
                              out)
            self._calls[key] = idx
        else:
            node = self._nodes[idx]
            if not node.name and isinstance(inner.get("name"), str):  # type: ignore[union-attr]
                node.name = inner["name"]  # type: ignore[union-attr]
        frag = inner.get("input" if custom else "arguments")
        if isinstance(frag, str):
            self._delta(idx, ev.ARGUMENTS, frag, out)
        elif frag is not None:
            self._delta(idx, ev.ARGUMENTS, orjson.dumps(frag).decode(), out)

    def _apply_delta(self, delta: dict[str, Any], out: list[ev.Event]) -> None:
        details = delta.get("reasoning_details")
        if isinstance(details, list) and details:
            for entry in details:
                if isinstance(entry, dict):
                    self._reasoning_detail(entry, out)
        else:
            for key in ("reasoning_content", "reasoning"):
                value = delta.get(key)
                if isinstance(value, str) and value:
                    if self._scalar is None:
                        self._scalar = self._start(ReasoningNode(extra={REASONING_SURFACE: key}), out)
                    self._delta(self._scalar, ev.REASONING_CONTENT, value, out)
                    break
            opaque = delta.get("reasoning_opaque")
            if isinstance(opaque, str) and opaque:
                if self._scalar is None:
                    self._scalar = self._start(ReasoningNode(), out)
                self._delta(self._scalar, ev.REASONING_ENCRYPTED, opaque, out)
        content = delta.get("content")
        if isinstance(content, str):
            if content:
                if self._text is None:
                    self._text = self._start(TextNode(role="assistant"), out)
                self._delta(self._text, ev.TEXT, content, out)
        elif isinstance(content, list):
            for block in content:
                if not isinstance(block, dict):
                    continue
                if block.get("type") in ("text", "output_text") and isinstance(block.get("text"), str):
                    if self._text is None:
                        self._text = self._start(TextNode(role="assistant"), out)
                    self._delta(self._text, ev.TEXT, block["text"], out)
                elif isinstance(block.get("type"), str):
                    node = ProviderItemNode(origin_protocol=PROTOCOL, item_type=block["type"], body=block)
                    idx = self._start(node, out)
        refusal = delta.get("refusal")
        if isinstance(refusal, str) and refusal:
            if self._refusal is None:
                self._refusal = self._start(RefusalNode(), out)
            self._delta(self._refusal, ev.REFUSAL, refusal, out)
        calls = delta.get("tool_calls")
        if isinstance(calls, list):
            for pos, tc in enumerate(calls):
                if isinstance(tc, dict):
                    self._tool_call(pos, tc, out)
        fc = delta.get("function_call")
        if isinstance(fc, dict):
            idx = self._calls.get("legacy")
            if idx is None:
                name = fc.get("name") or ""
                idx = self._start(ToolCallNode(call_id=LEGACY_PREFIX + name, name=name,
                                               extra={LEGACY_FUNCTION: True}), out)
                self._calls["legacy"] = idx
            if isinstance(fc.get("arguments"), str):
                self._delta(idx, ev.ARGUMENTS, fc["arguments"], out)

    def feed(self, event_name: str | None, data: str) -> list[ev.Event]:
        if self.finished:
            return []
        data = data.strip()
        if not data:
            return []
        if data == "[DONE]":
            if self._native_finish is not None:
                return self._complete()
            return self._fail("upstream stream ended before a finish_reason", "upstream_stream_incomplete")
        try:
            chunk = orjson.loads(data)
        except orjson.JSONDecodeError:
            return self._fail("upstream sent invalid JSON in its stream", "invalid_upstream_response")
        if not isinstance(chunk, dict):
            return self._fail("upstream stream chunk is not an object", "invalid_upstream_response")
        if too_deep(chunk, data):
            return self._fail("upstream stream chunk is nested too deeply", "invalid_upstream_response")
        out: list[ev.Event] = []
        if chunk.get("error"):
            return self._error(chunk["error"], out)
        if not self._started:
            self._started = True
            cid = chunk.get("id")
            created = chunk.get("created")
            out.append(ev.ResponseStart(id=cid if isinstance(cid, str) and cid else chat_id(None),
                                        model=chunk.get("model") if isinstance(chunk.get("model"), str) else "",
                                        created=created if isinstance(created, int) else None))
        if isinstance(chunk.get("usage"), dict):
            self._usage = decode_usage(chunk["usage"])
        choices = chunk.get("choices")
        if isinstance(choices, list):
            for choice in choices:
                if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                    continue
                if choice.get("error"):
                    return self._error(choice["error"], out)
                delta = choice.get("delta")
                mark = len(out)
                if isinstance(delta, dict):
                    self._apply_delta(delta, out)
                if isinstance(choice.get("message"), dict):
                    self._snapshot(choice["message"], out)
                logprobs = choice.get("logprobs")
                if logprobs is not None:
                    # choice-level extras ride on this chunk's first delta for a same-Chat replay
                    target = next((e for e in out[mark:] if isinstance(e, ev.NodeDelta)), None)
                    if target is not None:
                        target.extra[CHOICE_EXTRA] = {"logprobs": logprobs}
                reason = choice.get("finish_reason")
                if reason == "error":
                    return self._fail("upstream finished with an error", "upstream_error", out)
                if isinstance(reason, str) and reason:
                    self._native_finish = reason
        return out

    def close(self) -> list[ev.Event]:
        if self.finished:
            return []
        if self._native_finish is not None:
            return self._complete()
        return self._fail("upstream stream ended without a finish_reason", "upstream_stream_incomplete")


# -- encoder ------------------------------------------------------------------------------


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

    # framing
    def _frame(self, obj: dict[str, Any]) -> bytes:
        return b"data: " + orjson.dumps(obj) + b"\n\n"

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> bytes:
        choice: dict[str, Any] = {"index": 0, "delta": delta, "finish_reason": finish}
        if self._choice_extra:
            for key, value in self._choice_extra.items():
                choice.setdefault(key, value)
        return self._frame({"id": self._id, "object": "chat.completion.chunk", "created": self._created,
                            "model": self.ctx.model, "choices": [choice]})

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
                head = {"index": state.wire, "id": node.call_id, "type": "custom",
                        "custom": {"name": node.name, "input": ""}}
            else:
                head = {"index": state.wire, "id": node.call_id, "type": "function",
                        "function": {"name": node.name, "arguments": ""}}
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

    def _finish_node(self, state: _NodeState, node: Node) -> bytes:
        """Write whatever of the complete node was not streamed (terminal snapshots)."""
        out = b""
        if state.kind in ("text", "refusal") and isinstance(node, TextNode | RefusalNode):
            out += self._write(state, ev.TEXT if state.kind == "text" else ev.REFUSAL, node.content[state.sent:])
        elif state.kind == "call" and isinstance(node, ToolCallNode):
            out += self._write(state, ev.ARGUMENTS, node.arguments[state.sent:])
        elif state.kind == "reasoning" and isinstance(node, ReasoningNode):
            if node.content:
                out += self._write(state, ev.REASONING_CONTENT, node.content[state.sent:])
            if node.summary:
                out += self._write(state, ev.REASONING_SUMMARY, node.summary[state.sent_summary:])
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
        finish = finish_to_wire(done.finish_reason, done.extra.get(NATIVE_FINISH),
                                has_tool_calls=self._calls > 0 or self._legacy,
                                legacy=self._legacy and self._calls == 0)
        out += self._chunk({}, finish)
        if self.ctx.include_usage and done.usage is not None:
            out += self._frame({"id": self._id, "object": "chat.completion.chunk", "created": self._created,
                                "model": self.ctx.model, "choices": [],
                                "usage": encode_usage(done.usage, same_protocol=self._same)})
        return out + DONE

    def _error_frames(self, status: int | None, code: str | None, message: str, error_type: str | None,
                      param: str | None = None) -> bytes:
        err = {"message": message, "type": error_type or default_error_type(status or 500), "param": param,
               "code": code}
        return self._frame({"error": err}) + DONE

    # public API
    def encode(self, event: ev.Event) -> bytes:
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
            return self._ensure_started() + self._error_frames(event.status, event.code, event.message,
                                                               event.error_type)
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
            502, "upstream_stream_incomplete", "The upstream stream ended before it completed.", "api_error")


def default_error_type(status: int) -> str:
    """OpenAI-style error ``type`` for an HTTP status."""
    if status == 401:
        return "authentication_error"
    if status == 403:
        return "permission_error"
    if status == 404:
        return "not_found_error"
    if status == 429:
        return "rate_limit_error"
    if status >= 500:
        return "api_error"
    return "invalid_request_error"
