"""The item-level half of the Responses stream encoder: the encoder's state, SSE framing, and
the frames that open, extend and close each kind of output item (message text and refusal
parts, reasoning, tool calls). ``stream_encode.StreamEncoder`` builds on it and maps URP events
onto these steps; split so neither module grows past the size limit.
"""

from __future__ import annotations

import time
from typing import Any

import orjson

from gateway.urp import events as ev
from gateway.urp.accumulate import append_text
from gateway.urp.nodes import (
    Node,
    ReasoningNode,
    RefusalNode,
    TextNode,
    ToolCallNode,
    wire_extra,
)

from ..base import EncodeContext, json_text, new_id
from .common import M_SUMMARY, PROTOCOL, SUMMARY_SEP
from .response import client_response_id, response_object
from .stream_state import _Item, _Part


class ItemFrames:
    """Wire coordinates and per-item frames of one Responses stream (see ``StreamEncoder``)."""

    def __init__(self, ctx: EncodeContext) -> None:
        self.ctx = ctx
        self.same = ctx.source_protocol == PROTOCOL
        self._seq = 0
        self._started = False
        self._terminal = False
        self._rid = ""
        self._created = 0
        self._template: dict[str, Any] | None = None
        self._items: list[_Item] = []
        self._by_id: dict[str, _Item] = {}
        self._targets: dict[int, Any] = {}  # URP index -> _Pending | (_Item, _Part | None)
        self._msg: _Item | None = None  # the message item new text may still join
        self._synthetic = -1

    # -- framing -----------------------------------------------------------------------------

    def _frame(self, etype: str, payload: dict[str, Any]) -> bytes:
        self._seq += 1
        payload["type"] = etype
        payload["sequence_number"] = self._seq
        return b"event: " + etype.encode() + b"\ndata: " + orjson.dumps(payload) + b"\n\n"

    def _object(
        self,
        status: str,
        output: list[dict[str, Any]],
        usage: dict[str, Any] | None = None,
        error: dict[str, Any] | None = None,
        details: dict[str, Any] | None = None,
        template: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        return response_object(
            rid=self._rid,
            model=self.ctx.model,
            created_at=self._created,
            status=status,
            output=output,
            usage=usage,
            error=error,
            incomplete_details=details,
            template=template if template is not None else self._template,
        )

    def keepalive(self) -> bytes:
        return b":heartbeat\n\n"

    # -- lifecycle ---------------------------------------------------------------------------

    def _start(self, rid: str | None, created: int | None, template: dict[str, Any] | None) -> bytes:
        self._started = True
        self._rid = rid if self.same and rid else client_response_id(rid)
        self._created = created or int(time.time())
        self._template = template if self.same else None
        out = self._frame("response.created", {"response": self._object("in_progress", [])})
        return out + self._frame("response.in_progress", {"response": self._object("in_progress", [])})

    def _new_item(self, kind: str, item_id: str, head: dict[str, Any]) -> tuple[_Item, bytes]:
        buf = self._seal_msg()
        it = _Item(len(self._items), item_id, kind, head)
        self._items.append(it)
        self._by_id[item_id] = it
        buf += self._frame("response.output_item.added", {"output_index": it.oi, "item": dict(head)})
        return it, buf

    def _seal_msg(self) -> bytes:
        m, self._msg = self._msg, None
        if m is None:
            return b""
        m.sealed = True
        return self._maybe_close_msg(m)

    def _maybe_close_msg(self, m: _Item) -> bytes:
        if not m.sealed or m.final is not None or any(p.open for p in m.parts):
            return b""
        return self._close_item(m, self._message_item(m, "completed"))

    def _message_item(self, m: _Item, status: str) -> dict[str, Any]:
        item = dict(m.head)
        item["status"] = status
        item["content"] = [self._part_obj(p) for p in m.parts]
        return item

    def _part_obj(self, p: _Part) -> dict[str, Any]:
        obj: dict[str, Any]
        if p.ptype == "refusal":
            obj = {"type": "refusal", "refusal": p.text}
        else:
            obj = {"type": "output_text", "text": p.text, "annotations": [], "logprobs": []}
        for k, v in p.extra.items():
            obj.setdefault(k, v)
        return obj

    def _close_item(self, it: _Item, item: dict[str, Any]) -> bytes:
        it.final = item
        return self._frame("response.output_item.done", {"output_index": it.oi, "item": item})

    def _item_id(self, node: Node, prefix: str) -> str:
        """The upstream item id on same-protocol hops (keeps encrypted reasoning bound to its id),
        else a fresh one; never an id this stream already used."""
        if node.id and (self.same or node.id.startswith(prefix)) and node.id not in self._by_id:
            return node.id
        return new_id(prefix)

    # -- text --------------------------------------------------------------------------------

    def _open_part(self, node: TextNode | RefusalNode) -> tuple[_Item, _Part, bytes]:
        role = node.role if isinstance(node, TextNode) else "assistant"
        phase = node.phase if isinstance(node, TextNode) else None
        m = self._msg
        buf = b""
        if (
            m is None
            or m.role != role
            or m.phase != phase
            or (self.same and node.id is not None and m.src_id is not None and node.id != m.src_id)
        ):
            head: dict[str, Any] = {
                "id": self._item_id(node, "msg_"),
                "type": "message",
                "status": "in_progress",
                "role": role,
                "content": [],
            }
            if phase is not None:
                head["phase"] = phase
            m, buf = self._new_item("message", head["id"], head)
            m.role, m.phase, m.src_id = role, phase, node.id
            self._msg = m
        part = _Part(len(m.parts), "refusal" if isinstance(node, RefusalNode) else "output_text")
        if self.same and isinstance(node, TextNode):
            part.extra = {k: v for k, v in wire_extra(node.extra).items() if k in ("annotations", "logprobs")}
        m.parts.append(part)
        empty = (
            {"type": "refusal", "refusal": ""}
            if part.ptype == "refusal"
            else {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
        )
        buf += self._frame(
            "response.content_part.added",
            {"item_id": m.id, "output_index": m.oi, "content_index": part.index, "part": empty},
        )
        return m, part, buf

    def _text_delta(self, m: _Item, p: _Part, delta: str) -> bytes:
        append_text(p, "text", delta)
        if p.ptype == "refusal":
            return self._frame(
                "response.refusal.delta",
                {"item_id": m.id, "output_index": m.oi, "content_index": p.index, "delta": delta},
            )
        return self._frame(
            "response.output_text.delta",
            {"item_id": m.id, "output_index": m.oi, "content_index": p.index, "delta": delta, "logprobs": []},
        )

    def _close_part(self, m: _Item, p: _Part, text: str | None, close_item: bool = True) -> bytes:
        if not p.open:
            return b""
        buf = b""
        if text is not None and text != p.text:
            if text.startswith(p.text):
                buf += self._text_delta(m, p, text[len(p.text) :])
            else:
                p.text = text
        p.open = False
        base = {"item_id": m.id, "output_index": m.oi, "content_index": p.index}
        if p.ptype == "refusal":
            buf += self._frame("response.refusal.done", {**base, "refusal": p.text})
        else:
            buf += self._frame("response.output_text.done", {**base, "text": p.text, "logprobs": []})
        buf += self._frame("response.content_part.done", {**base, "part": self._part_obj(p)})
        return buf + self._maybe_close_msg(m) if close_item else buf

    # -- reasoning ---------------------------------------------------------------------------

    def _open_reasoning(self, node: ReasoningNode) -> tuple[_Item, bytes]:
        item_id = self._item_id(node, "rs_")
        head: dict[str, Any] = {"id": item_id, "type": "reasoning", "summary": []}
        return self._new_item("reasoning", item_id, head)

    def _summary_frames_close(self, it: _Item) -> bytes:
        """Close the open summary part."""
        it.summary_open = False
        base = {"item_id": it.id, "output_index": it.oi, "summary_index": len(it.parts_text) - 1}
        text = it.parts_text[-1]
        return self._frame("response.reasoning_summary_text.done", {**base, "text": text}) + self._frame(
            "response.reasoning_summary_part.done", {**base, "part": {"type": "summary_text", "text": text}}
        )

    def _reasoning_delta(self, it: _Item, kind: str, delta: str, sep: bool = False) -> bytes:
        base = {"item_id": it.id, "output_index": it.oi}
        buf = b""
        if kind == ev.REASONING_SUMMARY:
            append_text(it, "summary", delta)
            if sep:
                # Boundary between upstream summary parts: close this part; the next delta opens one.
                it.summary_sep = True
                return self._summary_frames_close(it) if it.summary_open else b""
            if not it.summary_open:
                it.summary_open = True
                it.summary_sep = False
                it.parts_text.append("")
                buf += self._frame(
                    "response.reasoning_summary_part.added",
                    {
                        **base,
                        "summary_index": len(it.parts_text) - 1,
                        "part": {"type": "summary_text", "text": ""},
                    },
                )
            parts = it.parts_text  # in place, linear in the summary's length (urp.accumulate.append_text)
            text = parts[-1]
            parts[-1] = ""
            text += delta
            parts[-1] = text
            return buf + self._frame(
                "response.reasoning_summary_text.delta",
                {**base, "summary_index": len(it.parts_text) - 1, "delta": delta},
            )
        if not it.content_open:
            it.content_open = True
            buf += self._frame(
                "response.content_part.added",
                {**base, "content_index": 0, "part": {"type": "reasoning_text", "text": ""}},
            )
        append_text(it, "content", delta)
        return buf + self._frame(
            "response.reasoning_text.delta", {**base, "content_index": 0, "delta": delta}
        )

    def _close_reasoning(self, it: _Item, node: ReasoningNode | None, status: str = "completed") -> bytes:
        buf = b""
        summary = node.summary if node is not None and node.summary is not None else it.summary
        content = node.content if node is not None and node.content is not None else it.content
        raw = node.extra.get(M_SUMMARY) if node is not None and self.same else None
        if (
            not it.summary
            and summary
            and isinstance(raw, list)
            and all(isinstance(x, dict) and isinstance(x.get("text"), str) for x in raw)
            and SUMMARY_SEP.join(x["text"] for x in raw) == summary
        ):
            # Never streamed (buffered or completion-only): replay the upstream's part layout.
            for i, x in enumerate(raw):
                if i:
                    buf += self._reasoning_delta(it, ev.REASONING_SUMMARY, SUMMARY_SEP, sep=True)
                buf += self._reasoning_delta(it, ev.REASONING_SUMMARY, x["text"])
        elif summary != it.summary and summary.startswith(it.summary):
            buf += self._reasoning_delta(it, ev.REASONING_SUMMARY, summary[len(it.summary) :])
        if content != it.content and content.startswith(it.content):
            buf += self._reasoning_delta(it, ev.REASONING_CONTENT, content[len(it.content) :])
        base = {"item_id": it.id, "output_index": it.oi}
        if it.summary_open:
            buf += self._summary_frames_close(it)
        if it.content_open:
            buf += self._frame(
                "response.reasoning_text.done", {**base, "content_index": 0, "text": it.content}
            )
            buf += self._frame(
                "response.content_part.done",
                {**base, "content_index": 0, "part": {"type": "reasoning_text", "text": it.content}},
            )
        if summary == it.summary:
            parts = [{"type": "summary_text", "text": t} for t in it.parts_text]
        else:  # a transform rewrote the summary: the final item carries its text
            parts = [{"type": "summary_text", "text": summary}] if summary else []
        item: dict[str, Any] = {"id": it.id, "type": "reasoning", "summary": parts}
        if content:
            item["content"] = [{"type": "reasoning_text", "text": content}]
        if node is not None and node.encrypted is not None:
            enc = node.encrypted
            item["encrypted_content"] = json_text(enc)
        if status != "completed":
            item["status"] = status
        return buf + self._close_item(it, item)

    # -- tool calls --------------------------------------------------------------------------

    def _open_call(self, node: ToolCallNode) -> tuple[_Item, bytes]:
        custom = node.tool_type == "custom"
        head: dict[str, Any] = {
            "id": self._item_id(node, "ctc_" if custom else "fc_"),
            "type": "custom_tool_call" if custom else "function_call",
        }
        if not custom:
            head["status"] = "in_progress"
        head["call_id"] = node.call_id
        if node.namespace is not None:
            head["namespace"] = node.namespace
        head["name"] = node.name
        head["input" if custom else "arguments"] = ""
        return self._new_item(head["type"], head["id"], head)

    def _call_delta(self, it: _Item, delta: str) -> bytes:
        append_text(it, "args", delta)
        name = (
            "response.custom_tool_call_input.delta"
            if it.kind == "custom_tool_call"
            else "response.function_call_arguments.delta"
        )
        return self._frame(name, {"item_id": it.id, "output_index": it.oi, "delta": delta})

    def _close_call(self, it: _Item, node: ToolCallNode | None, status: str = "completed") -> bytes:
        args = node.arguments if node is not None else it.args
        buf = b""
        if args != it.args and args.startswith(it.args):
            buf += self._call_delta(it, args[len(it.args) :])
        base = {"item_id": it.id, "output_index": it.oi}
        item = dict(it.head)
        if node is not None:  # the done node is authoritative (a transform may have restored the name)
            item["call_id"] = node.call_id
            item["name"] = node.name
            if node.namespace is not None:
                item["namespace"] = node.namespace
        if it.kind == "custom_tool_call":
            buf += self._frame("response.custom_tool_call_input.done", {**base, "input": args})
            item["input"] = args
        else:
            buf += self._frame(
                "response.function_call_arguments.done", {**base, "name": item["name"], "arguments": args}
            )
            item["arguments"] = args
            item["status"] = status
        return buf + self._close_item(it, item)
