"""Chat Completions streaming decoder: upstream SSE chunks -> URP events (reference §4.3).

Deltas of several nodes may interleave, so every NodeDone is emitted
at the end, followed by ResponseDone with the last usage seen; a ``[DONE]`` or EOF without a
finish_reason is an error, never a synthesised success.
"""

from __future__ import annotations

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

from ..base import new_id
from ..json_depth import too_deep
from .common import (
    CHOICE_EXTRA,
    LEGACY_FUNCTION,
    LEGACY_PREFIX,
    NATIVE_FINISH,
    PROTOCOL,
    REASONING_DETAIL,
    REASONING_SURFACE,
    chat_id,
    decode_usage,
    finish_from_wire,
    folds_into,
)


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
            return self._fail(
                err.get("message") if isinstance(err.get("message"), str) else "upstream error",
                str(code) if code is not None else "upstream_error",
                out,
                error_type=etype if isinstance(etype, str) else None,
                status=code if isinstance(code, int) else None,
                extra={"error": err},
            )
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
                self._delta(self._text, ev.TEXT, content[len(have) :], out)
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
        out.append(
            ev.ResponseDone(
                output=list(self._nodes),
                finish_reason=finish_from_wire(self._native_finish),
                usage=self._usage,
                extra=extra,
            )
        )
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
            node = ReasoningNode(
                id=entry.get("id") if isinstance(entry.get("id"), str) else None,
                source=entry.get("format") or None if isinstance(entry.get("format"), str) else None,
            )
            idx = self._start(node, out)
            if key is not None:
                self._details[key] = idx
            self._raw[idx] = {k: v for k, v in entry.items() if not str(k).startswith("_gw_")}
        else:
            raw = (
                self._folded[idx]
                if dtype == "reasoning.encrypted" and idx in self._folded
                else self._raw[idx]
            )
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
            idx = self._start(
                ToolCallNode(call_id=call_id, name=name, tool_type="custom" if custom else "function"), out
            )
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
                idx = self._start(
                    ToolCallNode(call_id=LEGACY_PREFIX + name, name=name, extra={LEGACY_FUNCTION: True}), out
                )
                self._calls["legacy"] = idx
            if isinstance(fc.get("arguments"), str):
                self._delta(idx, ev.ARGUMENTS, fc["arguments"], out)

    def _response_start(self, chunk: dict[str, Any]) -> ev.ResponseStart:
        cid = chunk.get("id")
        created = chunk.get("created")
        return ev.ResponseStart(
            id=cid if isinstance(cid, str) and cid else chat_id(None),
            model=chunk.get("model") if isinstance(chunk.get("model"), str) else "",
            created=created if isinstance(created, int) else None,
        )

    def _plain_text(self, chunk: dict[str, Any], out: list[ev.Event]) -> bool:
        """The common chunk, handled without the generic walk: one choice (index 0) whose delta
        holds only ``content`` (a string; ``role`` is ignored anyway) once the text node is open,
        no usage, error, message snapshot, logprobs or finish_reason. False: not that chunk
        (nothing was done; the generic path takes it)."""
        idx = self._text
        choices = chunk.get("choices")
        if idx is None or choices.__class__ is not list or len(choices) != 1:
            return False
        if isinstance(chunk.get("usage"), dict):
            return False
        choice = choices[0]
        if choice.__class__ is not dict or choice.get("index", 0) != 0:
            return False
        if choice.get("finish_reason") is not None or choice.get("logprobs") is not None:
            return False
        if choice.get("error") or isinstance(choice.get("message"), dict):
            return False
        delta = choice.get("delta")
        if delta.__class__ is not dict:
            return False
        for key in delta:
            if key != "content" and key != "role":
                return False
        content = delta.get("content")
        if content.__class__ is not str:
            return content is None
        if content:
            node: Any = self._nodes[idx]  # a TextNode; ``append_text`` inlined (one reference: in place)
            text = node.content
            node.content = ""
            text += content
            node.content = text
            out.append(ev.NodeDelta(index=idx, kind=ev.TEXT, delta=content))
        return True

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
            out.append(self._response_start(chunk))
        if self._plain_text(chunk, out):
            return out
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
