"""Canonical URP events -> client OpenAI Responses SSE (reference protocols.md §4.6, §4.9, §4.10).

The encoder owns every wire coordinate (item ids, output/content/summary indices, sequence
numbers) and is incremental: one small record per announced item, never the whole stream.
Items may be open concurrently when the upstream interleaves nodes (Chat upstreams do); each
closes when its nodes are done, and ``response.completed`` is rebuilt from the done items plus
any ResponseDone nodes that never streamed (buffered synthetic streams), without duplicates.

Deliberate choices:
- A ``cancelled`` status is reported as ``response.failed`` with ``status: "cancelled"`` (the
  public event set has no ``response.cancelled``).
- Reasoning items get no synthesized ``duration`` (not part of the public item shape).
- Text nodes are deferred like reasoning nodes: a node that ends empty emits nothing, so
  clients never see empty assistant messages.
- Same-protocol native events about an announced item are replayed with our coordinates;
  others are dropped so the lifecycle stays valid.
- No ``data: [DONE]`` after the terminal event (issue 19): OpenAI's Responses API does not send
  one, and strict stream parsers treat it as a malformed event. The reference sends it.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

from gateway.urp import events as ev
from gateway.urp.nodes import (
    ImageNode,
    Node,
    ProviderItemNode,
    ReasoningNode,
    RefusalNode,
    TextNode,
    ToolCallNode,
)

from ..base import new_id, without_internal
from .common import M_BODY, M_IS_PART, PROTOCOL
from .response import X_OBJECT, encode_usage, terminal_state
from .stream_decode import E_SUMMARY_SEP, X_START
from .stream_items import ItemFrames
from .stream_state import _Pending


class StreamEncoder(ItemFrames):
    """Canonical events -> client Responses SSE (protocols.md §4.6)."""

    # -- events ------------------------------------------------------------------------------

    def encode(self, event: ev.Event) -> bytes:
        if self._terminal:
            return b""
        t = type(event)
        if t is ev.ResponseStart:
            if self._started:
                return b""
            return self._start(event.id, event.created, event.extra.get(X_START))
        buf = b"" if self._started else self._start(None, None, None)
        if t is ev.NodeStart:
            return buf + self._node_start(event.index, event.node)
        if t is ev.NodeDelta:
            return buf + self._node_delta(event.index, event.kind, event.delta, event.extra)
        if t is ev.NodeDone:
            return buf + self._node_done(event.index, event.node)
        if t is ev.ResponseDone:
            return buf + self._response_done(event)
        if t is ev.StreamError:
            return buf + self._failed(event.code or "upstream_error", event.message)
        if t is ev.ProviderControl:
            return buf + self._control(event)
        return buf

    def _control(self, event: ev.ProviderControl) -> bytes:
        """Replay a same-protocol native event (e.g. ``response.web_search_call.searching``) with
        our own coordinates; events about items we did not announce (or already closed) are
        dropped so the lifecycle stays valid."""
        data = event.data
        if not (self.same and event.protocol == PROTOCOL and isinstance(data, dict)):
            return b""
        name = event.event_name
        if (
            name.startswith(
                (
                    "response.output_item.",
                    "response.content_part.",
                    "response.created",
                    "response.in_progress",
                    "response.completed",
                    "response.failed",
                    "response.incomplete",
                )
            )
            or name == "error"
        ):
            return b""
        payload = {k: v for k, v in data.items() if k not in ("type", "sequence_number")}
        if "output_index" in payload or "item_id" in payload:
            item_id = payload.get("item_id")  # upstream data: may be any JSON value
            it = self._by_id.get(item_id) if isinstance(item_id, str) else None
            if it is None or it.final is not None:
                return b""
            payload["output_index"] = it.oi
        return self._frame(name, payload)

    def _node_start(self, idx: int, node: Node) -> bytes:
        t = type(node)
        if t is TextNode or t is RefusalNode or t is ReasoningNode:
            if t is TextNode and node.role != "assistant":
                return b""
            self._targets[idx] = _Pending(node)
            return b""
        if t is ToolCallNode:
            it, buf = self._open_call(node)
            self._targets[idx] = (it, None)
            if node.arguments:
                buf += self._call_delta(it, node.arguments)
            return buf
        if (
            t is ProviderItemNode
            and self.same
            and node.origin_protocol == PROTOCOL
            and M_IS_PART not in node.extra
        ):
            body = without_internal(node.body)
            item_id = body.get("id") if isinstance(body.get("id"), str) else new_id("item_")
            it, buf = self._new_item("provider", item_id, body)
            self._targets[idx] = (it, None)
            return buf
        return b""

    def _materialize(self, idx: int, node: Node) -> bytes:
        if isinstance(node, ReasoningNode):
            it, buf = self._open_reasoning(node)
            self._targets[idx] = (it, None)
            return buf
        m, p, buf = self._open_part(node)
        self._targets[idx] = (m, p)
        return buf

    def _node_delta(self, idx: int, kind: str, delta: str, extra: dict[str, Any]) -> bytes:
        target = self._targets.get(idx)
        if target is None or not delta:
            return b""
        buf = b""
        if isinstance(target, _Pending):
            if kind == ev.REASONING_ENCRYPTED:
                return b""
            buf = self._materialize(idx, target.node)
            target = self._targets[idx]
        it, part = target
        if it.final is not None:
            return buf
        if part is not None:
            return buf + self._text_delta(it, part, delta)
        if it.kind == "reasoning":
            if kind in (ev.REASONING_SUMMARY, ev.REASONING_CONTENT):
                buf += self._reasoning_delta(it, kind, delta, bool(extra) and E_SUMMARY_SEP in extra)
            return buf
        if it.kind in ("function_call", "custom_tool_call") and kind == ev.ARGUMENTS:
            return buf + self._call_delta(it, delta)
        return buf

    def _node_done(self, idx: int, node: Node) -> bytes:
        target = self._targets.pop(idx, None)
        buf = b""
        if isinstance(target, _Pending):
            if isinstance(node, ReasoningNode):
                if not (node.summary or node.content or node.encrypted):
                    return b""
            elif not getattr(node, "content", ""):
                return b""
            buf = self._materialize(idx, node)
            target = self._targets.pop(idx)
        elif target is None:
            if isinstance(node, ImageNode) and node.role == "assistant" and node.source.kind == "base64":
                raw = node.extra.get(M_BODY) if self.same else None
                head = (
                    without_internal(raw)
                    if isinstance(raw, dict) and raw.get("id")
                    else {
                        "id": self._item_id(node, "ig_"),
                        "type": "image_generation_call",
                        "status": "completed",
                        "result": node.source.data,
                    }
                )
                it, buf = self._new_item("provider", head["id"], head)
                return buf + self._close_item(it, head)
            return b""
        it, part = target
        if it.final is not None:
            return buf
        if part is not None:
            return buf + self._close_part(it, part, getattr(node, "content", None))
        if it.kind == "reasoning":
            return buf + self._close_reasoning(it, node if isinstance(node, ReasoningNode) else None)
        if it.kind in ("function_call", "custom_tool_call"):
            return buf + self._close_call(it, node if isinstance(node, ToolCallNode) else None)
        body = without_internal(node.body) if isinstance(node, ProviderItemNode) else it.head
        return buf + self._close_item(it, body)

    def _close_open(self, status: str) -> bytes:
        """Close every announced item still open (parts first), in output_index order."""
        if self._msg is not None:
            self._msg.sealed = True
            self._msg = None
        buf = b""
        for it in self._items:
            if it.final is not None:
                continue
            if it.kind == "message":
                for p in it.parts:
                    if p.open:
                        buf += self._close_part(it, p, None, close_item=False)
                if it.final is None:
                    buf += self._close_item(it, self._message_item(it, status))
            elif it.kind == "reasoning":
                buf += self._close_reasoning(it, None, status)
            elif it.kind in ("function_call", "custom_tool_call"):
                buf += self._close_call(it, None, status)
            else:
                buf += self._close_item(it, it.head)
        self._targets.clear()
        return buf

    def _streamed(self) -> tuple[Counter, set[str], set[Any], set[str]]:
        """What did stream, as the keys ``_fallback`` matches ResponseDone nodes against: text
        parts (counted), call ids, reasoning ids and contents, other item ids and image results."""
        texts: Counter = Counter()
        calls: set[str] = set()
        reasons: set[Any] = set()
        others: set[str] = set()
        for it in self._items:
            if it.kind == "message":
                for p in it.parts:
                    texts[(p.ptype, it.role, p.text)] += 1
            elif it.kind in ("function_call", "custom_tool_call"):
                calls.add(it.head.get("call_id"))
            elif it.kind == "reasoning":
                reasons.add(it.id)
                reasons.add(("s", it.summary, it.content))
            else:
                others.add(it.id)
                result = it.head.get("result")
                if it.head.get("type") == "image_generation_call" and isinstance(result, str):
                    others.add(result)
        return texts, calls, reasons, others

    def _fallback(self, output: list[Node]) -> bytes:
        """Show the ResponseDone nodes that never streamed (completion-only or buffered
        synthetic streams), without duplicating what did stream."""
        texts, calls, reasons, others = self._streamed()
        buf = b""
        for node in output:
            t = type(node)
            if t is TextNode or t is RefusalNode:
                if not node.content or (t is TextNode and node.role != "assistant"):
                    continue
                key = (
                    "refusal" if t is RefusalNode else "output_text",
                    node.role if t is TextNode else "assistant",
                    node.content,
                )
                if texts[key] > 0:
                    texts[key] -= 1
                    continue
            elif t is ToolCallNode:
                if node.call_id in calls:
                    continue
            elif t is ReasoningNode:
                if (node.id and node.id in reasons) or (
                    "s",
                    node.summary or "",
                    node.content or "",
                ) in reasons:
                    continue
            elif t is ProviderItemNode:
                body_id = node.body.get("id")  # upstream data: may be any JSON value
                if not (self.same and node.origin_protocol == PROTOCOL) or (
                    isinstance(body_id, str) and body_id in others
                ):
                    continue
            elif t is ImageNode:
                if node.source.data in others:
                    continue
            else:
                continue
            idx = self._synthetic
            self._synthetic -= 1
            buf += self._node_start(idx, node)
            buf += self._node_done(idx, node)
        return buf

    def _response_done(self, done: ev.ResponseDone) -> bytes:
        buf = self._close_open("completed")
        buf += self._fallback(done.output)
        buf += self._seal_msg()
        status, error, details = terminal_state(done.finish_reason, done.extra, self.same)
        template = done.extra.get(X_OBJECT) if self.same else None
        obj = self._object(
            status,
            [it.final for it in self._items if it.final is not None],
            usage=encode_usage(done.usage) if done.usage is not None else None,
            error=error,
            details=details,
            template=template,
        )
        if status == "completed":
            obj.setdefault("completed_at", int(time.time()))
        name = {"completed": "response.completed", "incomplete": "response.incomplete"}.get(
            status, "response.failed"
        )
        self._terminal = True
        return buf + self._frame(name, {"response": obj})

    def _failed(self, code: str, message: str) -> bytes:
        buf = self._close_open("incomplete")
        err = {"code": code, "message": message}
        obj = self._object("failed", [it.final for it in self._items if it.final is not None], error=err)
        self._terminal = True
        return buf + self._frame("response.failed", {"response": obj})

    def error(self, status: int, code: str, message: str) -> bytes:
        """Pre-stream error: ``error`` then ``response.failed`` (§4.9, without its ``[DONE]``)."""
        if self._terminal:
            return b""
        if self._started:
            return self._failed(code, message)
        if not self._rid:
            self._rid = new_id("resp_")
            self._created = int(time.time())
        self._terminal = True
        buf = self._frame("error", {"code": code, "message": message, "param": None})
        obj = self._object("failed", [], error={"code": code, "message": message})
        return buf + self._frame("response.failed", {"response": obj})

    def close(self) -> bytes:
        if self._terminal:
            return b""
        message = "upstream stream ended before completion"
        if not self._started:
            return self.error(502, "upstream_stream_incomplete", message)
        return self._failed("upstream_stream_incomplete", message)
