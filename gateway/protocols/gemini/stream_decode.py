"""Gemini streaming decoder: ``streamGenerateContent?alt=sse`` chunks -> URP events."""

from __future__ import annotations

from copy import copy
from typing import Any

import orjson

from gateway.urp import (
    Node,
    NodeDelta,
    NodeDone,
    NodeStart,
    ProviderItemNode,
    ReasoningNode,
    ResponseDone,
    ResponseStart,
    StreamError,
    TextNode,
    ToolCallNode,
    Usage,
)
from gateway.urp import events as ev
from gateway.urp.accumulate import append_text

from ..base import new_id
from ..json_depth import too_deep
from .common import NATIVE_FINISH, PROTOCOL, SIGNATURE, _Calls, _error, _finish, _media_node, decode_usage


class StreamDecoder:
    """``streamGenerateContent?alt=sse``: every data line is a whole GenerateContentResponse
    chunk. Consecutive text (or thought) parts across chunks grow one node; a function call is a
    complete node on arrival. The chunk carrying ``finishReason`` is terminal (its usage is the
    final one); EOF before it is an error."""

    def __init__(self) -> None:
        self.finished = False
        self._started = False
        self._calls: _Calls | None = None
        self._nodes: list[Node] = []
        self._open: int | None = None  # index of the text/thought node still growing
        self._usage: Usage | None = None

    def _fail(self, message: str, code: str, **kw: Any) -> list:
        self.finished = True
        return [StreamError(message=message, code=code, **kw)]

    def _close_open(self) -> list:
        if self._open is None:
            return []
        index, self._open = self._open, None
        return [NodeDone(index=index, node=copy(self._nodes[index]))]

    def _new(self, node: Node) -> list:
        index = len(self._nodes)
        self._nodes.append(node)
        header = copy(node)
        header.extra = dict(node.extra)  # the working node keeps growing; the header must not
        if isinstance(header, ToolCallNode):
            header.arguments = ""  # a header carries no content; the arguments follow as a delta
        return [NodeStart(index=index, node=header)]

    def _whole(self, node: Node, delta: tuple[str, str] | None = None) -> list:
        out = self._close_open() + self._new(node)
        index = len(self._nodes) - 1
        if delta is not None:
            out.append(NodeDelta(index=index, kind=delta[0], delta=delta[1]))
        out.append(NodeDone(index=index, node=copy(node)))
        return out

    def _text_part(self, part: dict[str, Any]) -> list:
        text = part.get("text") if isinstance(part.get("text"), str) else ""
        sig = part.get("thoughtSignature")
        thought = bool(part.get("thought"))
        out: list = []
        current = self._nodes[self._open] if self._open is not None else None
        fits = isinstance(current, ReasoningNode) if thought else isinstance(current, TextNode)
        if not fits or (current is not None and current.extra.get(SIGNATURE)):
            if not text and sig and current is not None and not current.extra.get(SIGNATURE) and not thought:
                fits = True  # a trailing empty part that only carries the signature
            else:
                out.extend(self._close_open())
                out.extend(self._new(ReasoningNode(summary="") if thought else TextNode(role="assistant")))
                self._open = len(self._nodes) - 1
        index = self._open
        assert index is not None
        node = self._nodes[index]
        if text:
            if isinstance(node, ReasoningNode):
                node.summary = (node.summary or "") + text
                out.append(NodeDelta(index=index, kind=ev.REASONING_SUMMARY, delta=text))
            elif isinstance(node, TextNode):
                append_text(node, "content", text)
                out.append(NodeDelta(index=index, kind=ev.TEXT, delta=text))
        if sig:
            node.extra[SIGNATURE] = sig
            if isinstance(node, ReasoningNode):
                node.encrypted = sig
                out.append(NodeDelta(index=index, kind=ev.REASONING_ENCRYPTED, delta=sig))
        return out

    def _chunk(self, chunk: Any) -> list:
        if not isinstance(chunk, dict):
            return self._fail("upstream stream chunk is not an object", "invalid_upstream_response")
        if "error" in chunk:
            err = _error(chunk)
            return self._fail(err.message, err.code, status=err.status, error_type=err.error_type)
        out: list = []
        if not self._started:
            self._started = True
            rid = chunk.get("responseId") if isinstance(chunk.get("responseId"), str) else None
            self._calls = _Calls(rid)
            out.append(
                ResponseStart(id=rid or new_id("gemini-", 8), model=str(chunk.get("modelVersion") or ""))
            )
        assert self._calls is not None
        usage = decode_usage(chunk.get("usageMetadata"))
        if usage is not None:
            self._usage = usage
        candidates = chunk.get("candidates")
        cand = (
            candidates[0]
            if isinstance(candidates, list) and candidates and isinstance(candidates[0], dict)
            else {}
        )
        content = cand.get("content") if isinstance(cand.get("content"), dict) else {}
        parts = content.get("parts")
        for part in parts if isinstance(parts, list) else ():
            if not isinstance(part, dict):
                continue
            if "text" in part:
                out.extend(self._text_part(part))
            elif isinstance(part.get("functionCall"), dict):
                call = self._calls.node(part["functionCall"], part)
                out.extend(self._whole(call, (ev.ARGUMENTS, call.arguments)))
            elif isinstance(part.get("inlineData"), dict):
                out.extend(self._whole(_media_node(part["inlineData"])))
            else:
                kind = next((k for k in part if k != "thoughtSignature"), "unknown")
                out.extend(self._whole(ProviderItemNode(origin_protocol=PROTOCOL, item_type=kind, body=part)))
        native = cand.get("finishReason")
        feedback = chunk.get("promptFeedback")
        if not native and isinstance(feedback, dict) and feedback.get("blockReason"):
            native = "SAFETY"
        if isinstance(native, str) and native:
            out.extend(self._close_open())
            output = list(self._nodes)
            out.append(
                ResponseDone(
                    output=output,
                    finish_reason=_finish(native, output),
                    usage=self._usage,
                    extra={NATIVE_FINISH: native},
                )
            )
            self.finished = True
        return out

    def feed(self, event_name: str | None, data: str) -> list:
        if self.finished:
            return []
        if data.strip() == "[DONE]":
            return self._fail("upstream stream ended without a finishReason", "upstream_stream_incomplete")
        try:
            chunk = orjson.loads(data)
        except orjson.JSONDecodeError:
            return self._fail("upstream sent invalid JSON in a stream chunk", "invalid_upstream_response")
        if too_deep(chunk, data):
            return self._fail("upstream stream chunk is nested too deeply", "invalid_upstream_response")
        chunks = chunk if isinstance(chunk, list) else [chunk]
        out: list = []
        for item in chunks:
            out.extend(self._chunk(item))
            if self.finished:
                break
        return out

    def close(self) -> list:
        if self.finished:
            return []
        return self._fail("upstream stream ended without a finishReason", "upstream_stream_incomplete")
