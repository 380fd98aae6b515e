"""OpenAI Responses upstream SSE -> canonical URP events (reference protocols.md §4.2, §4.4).

Incremental: one small reconstruction slot per upstream output item, keyed by output_index
(with item id as a fallback). ``output_item.done`` and the terminal response object are
authoritative; items only the terminal object carries are synthesized (completion-only
fallback) without duplicating classes that did stream.

Deliberate choices:
- An upstream ``response.failed`` becomes a ``StreamError`` (the attempt failed), not a
  ``ResponseDone`` with an ``other`` finish reason. On any StreamError the decoder leaves open
  nodes open (no NodeDone): a truncated tool call must never look complete to a transform.
- Reasoning summary parts are joined with a blank line; the boundary delta is flagged
  (``E_SUMMARY_SEP``) so a Responses client gets the parts back.
"""

from __future__ import annotations

from collections.abc import Callable
from copy import copy
from typing import Any

from gateway.errors import ProtocolError
from gateway.urp import events as ev
from gateway.urp.accumulate import Accumulator
from gateway.urp.nodes import (
    ImageNode,
    MediaSource,
    Node,
    ProviderItemNode,
    ReasoningNode,
    RefusalNode,
    TextNode,
    ToolCallNode,
)

from ..base import new_id, without_internal
from .common import M_ITEM, M_SUMMARY, PROTOCOL, SUMMARY_SEP, decode_item
from .response import (
    X_OBJECT,
    X_STATUS,
    decode_output,
    decode_usage,
    finish_from_status,
    images_from_items,
)
from .sse_json import parse_data

X_START = "_gw_rsp_start"  # ResponseStart.extra: the upstream start object minus output/usage
E_SUMMARY_SEP = "_gw_rsp_summary_sep"  # NodeDelta.extra: this delta is the separator between summary parts

_TERMINALS = frozenset({"response.completed", "response.incomplete", "response.failed", "response.cancelled"})


def _template(obj: Any) -> dict[str, Any] | None:
    if not isinstance(obj, dict):
        return None
    return {k: without_internal(v) for k, v in obj.items() if k not in ("output", "usage", "output_text")}


# --------------------------------------------------------------------------------------------
# decoder
# --------------------------------------------------------------------------------------------


class _Slot:
    """One upstream output item under reconstruction."""

    __slots__ = ("kind", "item", "node", "parts", "done", "encrypted", "sidx")

    def __init__(self, kind: str, item: dict[str, Any]) -> None:
        self.kind = kind  # message | reasoning | call | provider
        self.item = item
        self.node: int | None = None  # URP index (single-node items)
        self.parts: dict[int, int] = {}  # content_index -> URP index (message items)
        self.done = False
        self.encrypted: Any = None
        self.sidx: int | None = None  # last reasoning summary_index seen


def _kind(item_type: Any) -> str:
    if item_type == "message":
        return "message"
    if item_type == "reasoning":
        return "reasoning"
    if item_type in ("function_call", "custom_tool_call"):
        return "call"
    if item_type == "image_generation_call":
        return "image"  # becomes an ImageNode (or a provider item without result) at done
    return "provider"


class StreamDecoder:
    """Upstream Responses SSE -> canonical events (protocols.md §4.4)."""

    def __init__(self) -> None:
        self.finished = False
        self._started = False
        self._next = 0
        self._acc = Accumulator()
        self._open: set[int] = set()
        self._slots: dict[int, _Slot] = {}
        self._ids: dict[str, _Slot] = {}
        self._streamed: set[str] = set()  # kinds seen streaming

    # -- helpers -----------------------------------------------------------------------------

    def _emit(self, out: list[ev.Event], event: ev.Event) -> None:
        self._acc.feed(event)
        out.append(event)

    def _ensure_start(self, out: list[ev.Event], resp: Any = None) -> None:
        if self._started:
            return
        self._started = True
        resp = resp if isinstance(resp, dict) else {}
        rid = resp.get("id")
        created = resp.get("created_at")
        start = ev.ResponseStart(
            id=rid if isinstance(rid, str) and rid else new_id("resp_"),
            model=resp.get("model") if isinstance(resp.get("model"), str) else "",
            created=created if isinstance(created, int) else None,
        )
        if resp:
            start.extra[X_START] = _template(resp)
        out.append(start)

    def _start_node(self, out: list[ev.Event], header: Node) -> int:
        idx = self._next
        self._next += 1
        self._open.add(idx)
        self._emit(out, ev.NodeStart(index=idx, node=header))
        return idx

    def _delta(self, out: list[ev.Event], idx: int | None, kind: str, delta: Any) -> None:
        if idx is None or idx not in self._open or not isinstance(delta, str) or not delta:
            return
        self._emit(out, ev.NodeDelta(index=idx, kind=kind, delta=delta))

    def _done(self, out: list[ev.Event], idx: int, node: Node | None = None) -> None:
        if idx not in self._open:
            return
        self._open.discard(idx)
        self._emit(out, ev.NodeDone(index=idx, node=node if node is not None else self._acc.nodes[idx]))

    def _slot(self, payload: dict[str, Any], create_kind: str | None = None) -> _Slot | None:
        oi = payload.get("output_index")
        slot = self._slots.get(oi) if isinstance(oi, int) else None
        if slot is None and isinstance(payload.get("item_id"), str):
            slot = self._ids.get(payload["item_id"])
        if slot is None and create_kind is not None and isinstance(oi, int):
            item = {"type": create_kind}
            if isinstance(payload.get("item_id"), str):
                item["id"] = payload["item_id"]
            slot = self._slots[oi] = _Slot(_kind(create_kind), item)
        return slot

    def _snapshot(self, out: list[ev.Event], idx: int | None, kind: str, full: Any) -> None:
        """A ``*.done`` snapshot: emit the missing suffix when it extends what streamed."""
        if idx is None or idx not in self._open or not isinstance(full, str):
            return
        node = self._acc.nodes[idx]
        have = {
            ev.TEXT: "content",
            ev.REFUSAL: "content",
            ev.ARGUMENTS: "arguments",
            ev.REASONING_SUMMARY: "summary",
            ev.REASONING_CONTENT: "content",
        }[kind]
        cur = getattr(node, have) or ""
        if full.startswith(cur) and len(full) > len(cur):
            self._delta(out, idx, kind, full[len(cur) :])

    def _header(self, item: dict[str, Any]) -> Node:
        """The node header for an ``output_item.added`` item (content left empty)."""
        t = item.get("type")
        iid = item.get("id") if isinstance(item.get("id"), str) else None
        if t == "reasoning":
            return ReasoningNode(id=iid)
        if t in ("function_call", "custom_tool_call"):
            ns = item.get("namespace")
            return ToolCallNode(
                id=iid,
                call_id=str(item.get("call_id") or iid or new_id("call_")),
                name=str(item.get("name") or ""),
                namespace=ns if isinstance(ns, str) else None,
                tool_type="custom" if t == "custom_tool_call" else "function",
            )
        return ProviderItemNode(
            id=iid,
            origin_protocol=PROTOCOL,
            item_type=str(t),
            body=without_internal(item),
            role=item.get("role") if isinstance(item.get("role"), str) else "assistant",
        )

    def _part_header(self, slot: _Slot, part: Any) -> Node:
        item = slot.item
        role = item.get("role") if isinstance(item.get("role"), str) else "assistant"
        iid = item.get("id") if isinstance(item.get("id"), str) else None
        if isinstance(part, dict) and part.get("type") == "refusal":
            return RefusalNode(id=iid)
        phase = item.get("phase") if isinstance(item.get("phase"), str) else None
        return TextNode(id=iid, role=role, phase=phase)

    def _part_index(self, out: list[ev.Event], slot: _Slot, ci: Any, part: Any = None) -> int:
        ci = ci if isinstance(ci, int) else 0
        idx = slot.parts.get(ci)
        if idx is None:
            idx = slot.parts[ci] = self._start_node(out, self._part_header(slot, part))
            self._streamed.add("message")
        return idx

    def _final_nodes(self, item: dict[str, Any]) -> list[Node]:
        nodes: list[Node] = []
        try:
            decode_item(item, "output", "assistant", nodes)
        except ProtocolError:
            return []
        return images_from_items(nodes)

    def _finish_item(self, out: list[ev.Event], slot: _Slot, item: dict[str, Any]) -> None:
        """``output_item.done``: close the slot's nodes with the authoritative done item."""
        slot.done = True
        finals = self._final_nodes(item)
        if slot.kind == "message":
            parts = [n for n in finals if isinstance(n, TextNode | RefusalNode)]
            for ci, node in enumerate(parts):
                node.extra.pop(M_ITEM, None)
                idx = slot.parts.get(ci)
                if idx is None:
                    if not node.content:
                        continue
                    idx = slot.parts[ci] = self._start_node(out, self._part_header(slot, {"type": node.type}))
                    self._delta(
                        out, idx, ev.REFUSAL if isinstance(node, RefusalNode) else ev.TEXT, node.content
                    )
                elif not node.content:
                    node.content = getattr(self._acc.nodes[idx], "content", "")
                else:  # deltas lost on the way: send the missing suffix before the done node
                    self._snapshot(
                        out, idx, ev.REFUSAL if isinstance(node, RefusalNode) else ev.TEXT, node.content
                    )
                self._done(out, idx, node)
            for idx in slot.parts.values():
                self._done(out, idx)
            return
        node = finals[0] if finals else None
        if slot.node is None:
            if isinstance(node, ImageNode):
                header = ImageNode(
                    id=node.id,
                    role="assistant",
                    source=MediaSource(kind="base64", media_type=node.source.media_type),
                )
            else:
                header = self._header(item)
            slot.node = self._start_node(out, header)
        idx = slot.node
        acc = self._acc.nodes[idx]
        if isinstance(node, ToolCallNode) and isinstance(acc, ToolCallNode):
            if not node.arguments:
                node.arguments = acc.arguments
            self._snapshot(out, idx, ev.ARGUMENTS, node.arguments)
        elif isinstance(node, ReasoningNode) and isinstance(acc, ReasoningNode):
            if node.summary is None and acc.summary:
                node.summary = acc.summary
                node.extra.pop(M_SUMMARY, None)
            if node.content is None and acc.content:
                node.content = acc.content
            if node.encrypted is None:
                node.encrypted = slot.encrypted if slot.encrypted is not None else acc.encrypted
            self._snapshot(out, idx, ev.REASONING_SUMMARY, node.summary)
            self._snapshot(out, idx, ev.REASONING_CONTENT, node.content)
        self._done(out, idx, node)

    # -- feed --------------------------------------------------------------------------------

    def feed(self, event_name: str | None, data: str) -> list[ev.Event]:
        if self.finished:
            return []
        out: list[ev.Event] = []
        if data.strip() == "[DONE]":
            self._fail(out, "upstream_stream_incomplete", "upstream stream ended before a terminal event")
            return out
        try:
            values = parse_data(data)
        except ValueError:
            self._fail(out, "invalid_upstream_response", "upstream sent an invalid stream event")
            return out
        for payload in values:
            if self.finished:
                break
            if isinstance(payload, dict):
                etype = payload.get("type")
                self._handle(out, etype if isinstance(etype, str) and etype else event_name, payload)
        return out

    def _fail(
        self,
        out: list[ev.Event],
        code: str,
        message: str,
        *,
        error_type: str | None = None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        self.finished = True
        out.append(ev.StreamError(message=message, code=code, error_type=error_type, extra=extra or {}))

    def _handle(self, out: list[ev.Event], etype: Any, p: dict[str, Any]) -> None:
        """One upstream event: lifecycle and errors first, then the per-type handler from
        ``_HANDLERS``; an unknown type is forwarded as a ProviderControl event."""
        if etype in ("response.created", "response.in_progress", "response.queued"):
            self._ensure_start(out, p.get("response"))
            return
        if etype == "error":
            err = p.get("error") if isinstance(p.get("error"), dict) else p
            self._fail(
                out,
                str(err.get("code") or "upstream_error"),
                str(err.get("message") or "upstream error"),
                error_type=err.get("type") if isinstance(err.get("type"), str) else None,
                extra={"param": err.get("param")} if err.get("param") is not None else None,
            )
            return
        self._ensure_start(out)
        if etype in _TERMINALS:
            self._terminal(out, etype, p.get("response") if isinstance(p.get("response"), dict) else {})
            return
        handler = self._HANDLERS.get(etype)
        if handler is not None:
            handler(self, out, etype, p)
            return
        if isinstance(etype, str) and (
            etype.startswith("response.reasoning_summary_") or etype.startswith("response.reasoning_text.")
        ):
            return  # part boundaries and snapshots: the done item is authoritative
        if isinstance(etype, str):
            out.append(ev.ProviderControl(protocol=PROTOCOL, event_name=etype, data=without_internal(p)))

    def _on_item_added(self, out: list[ev.Event], etype: str, p: dict[str, Any]) -> None:
        item = p.get("item")
        oi = p.get("output_index")
        if not isinstance(item, dict) or not isinstance(oi, int):
            return
        slot = self._slots[oi] = _Slot(_kind(item.get("type")), item)
        if isinstance(item.get("id"), str):
            self._ids[item["id"]] = slot
        if slot.kind == "image":
            self._streamed.add("image")
        elif slot.kind != "message":
            slot.node = self._start_node(out, self._header(item))
            self._streamed.add(slot.kind)
            if slot.kind == "reasoning":
                slot.encrypted = item.get("encrypted_content")
            elif slot.kind == "call":
                self._delta(
                    out,
                    slot.node,
                    ev.ARGUMENTS,
                    item.get("input" if item.get("type") == "custom_tool_call" else "arguments"),
                )

    def _on_item_done(self, out: list[ev.Event], etype: str, p: dict[str, Any]) -> None:
        item = p.get("item")
        if not isinstance(item, dict):
            return
        slot = self._slot(p, None)
        if slot is None:
            oi = p.get("output_index")
            slot = _Slot(_kind(item.get("type")), item)
            if isinstance(oi, int):
                self._slots[oi] = slot
            if isinstance(item.get("id"), str):
                self._ids[item["id"]] = slot
        if not slot.done:
            self._finish_item(out, slot, item)

    def _on_part_added(self, out: list[ev.Event], etype: str, p: dict[str, Any]) -> None:
        slot = self._slot(p, "message")
        part = p.get("part")
        if slot is not None and slot.kind == "message":
            idx = self._part_index(out, slot, p.get("content_index"), part)
            if isinstance(part, dict):
                self._delta(
                    out,
                    idx,
                    ev.REFUSAL if part.get("type") == "refusal" else ev.TEXT,
                    part.get("refusal") if part.get("type") == "refusal" else part.get("text"),
                )

    def _on_text_delta(self, out: list[ev.Event], etype: str, p: dict[str, Any]) -> None:
        slot = self._slot(p, "message")
        if slot is not None and slot.kind == "message":
            refusal = etype == "response.refusal.delta"
            idx = self._part_index(
                out, slot, p.get("content_index"), {"type": "refusal"} if refusal else None
            )
            self._delta(out, idx, ev.REFUSAL if refusal else ev.TEXT, p.get("delta"))

    def _on_text_done(self, out: list[ev.Event], etype: str, p: dict[str, Any]) -> None:
        slot = self._slot(p)
        if slot is not None and slot.kind == "message":
            refusal = etype == "response.refusal.done"
            idx = self._part_index(
                out, slot, p.get("content_index"), {"type": "refusal"} if refusal else None
            )
            self._snapshot(
                out, idx, ev.REFUSAL if refusal else ev.TEXT, p.get("refusal" if refusal else "text")
            )

    def _on_part_done(self, out: list[ev.Event], etype: str, p: dict[str, Any]) -> None:
        return  # the part closes with its item (output_item.done carries the authoritative text)

    def _on_reasoning_delta(self, out: list[ev.Event], etype: str, p: dict[str, Any]) -> None:
        slot = self._slot(p, "reasoning")
        if slot is not None and slot.kind == "reasoning":
            if slot.node is None:
                slot.node = self._start_node(out, self._header(slot.item))
                self._streamed.add("reasoning")
            if "summary" in etype:
                si = p.get("summary_index") if isinstance(p.get("summary_index"), int) else 0
                if slot.sidx is not None and si != slot.sidx and p.get("delta"):
                    # A new summary part: the URP summary joins parts with a blank line.
                    self._emit(
                        out,
                        ev.NodeDelta(
                            index=slot.node,
                            kind=ev.REASONING_SUMMARY,
                            delta=SUMMARY_SEP,
                            extra={E_SUMMARY_SEP: True},
                        ),
                    )
                if p.get("delta"):
                    slot.sidx = si
                self._delta(out, slot.node, ev.REASONING_SUMMARY, p.get("delta"))
            else:
                self._delta(out, slot.node, ev.REASONING_CONTENT, p.get("delta"))

    def _on_arguments_delta(self, out: list[ev.Event], etype: str, p: dict[str, Any]) -> None:
        slot = self._slot(p, "custom_tool_call" if "custom" in etype else "function_call")
        if slot is not None and slot.kind == "call":
            if slot.node is None:
                slot.node = self._start_node(out, self._header(slot.item))
                self._streamed.add("call")
            self._delta(out, slot.node, ev.ARGUMENTS, p.get("delta"))

    def _on_arguments_done(self, out: list[ev.Event], etype: str, p: dict[str, Any]) -> None:
        slot = self._slot(p)
        if slot is not None and slot.kind == "call":
            self._snapshot(out, slot.node, ev.ARGUMENTS, p.get("input" if "custom" in etype else "arguments"))

    _HANDLERS: dict[str, Callable[[StreamDecoder, list[ev.Event], str, dict[str, Any]], None]] = {
        "response.output_item.added": _on_item_added,
        "response.output_item.done": _on_item_done,
        "response.content_part.added": _on_part_added,
        "response.output_text.delta": _on_text_delta,
        "response.refusal.delta": _on_text_delta,
        "response.output_text.done": _on_text_done,
        "response.refusal.done": _on_text_done,
        "response.content_part.done": _on_part_done,
        "response.reasoning_summary_text.delta": _on_reasoning_delta,
        "response.reasoning_text.delta": _on_reasoning_delta,
        "response.function_call_arguments.delta": _on_arguments_delta,
        "response.custom_tool_call_input.delta": _on_arguments_delta,
        "response.function_call_arguments.done": _on_arguments_done,
        "response.custom_tool_call_input.done": _on_arguments_done,
    }

    def _unstreamed(self, out: list[ev.Event], items: list[Any]) -> bool:
        """Emit the terminal object's items that never streamed (and finish the open ones it
        completes); False, with the failure emitted, when it conflicts with what did stream."""
        for item in items:
            if not isinstance(item, dict):
                continue
            kind = _kind(item.get("type"))
            iid = item.get("id")
            if isinstance(iid, str) and iid in self._ids:
                slot = self._ids[iid]
                conflict = self._conflict(slot, item)
                if conflict is not None:
                    self._fail(
                        out,
                        "responses_terminal_conflict",
                        f"upstream terminal response conflicts with the streamed output ({conflict})",
                    )
                    return False
                if not slot.done:
                    self._finish_item(out, slot, item)
                continue
            if kind in self._streamed:
                continue
            try:
                nodes = decode_output([item])
            except Exception:
                continue
            for node in nodes:
                node.extra.pop(M_ITEM, None)
                if isinstance(node, TextNode | RefusalNode) and not node.content:
                    continue
                header = copy(node)
                idx = self._start_node(out, header)
                self._done(out, idx, node)
        return True

    def _terminal(self, out: list[ev.Event], etype: str, resp: dict[str, Any]) -> None:
        status = resp.get("status") or etype.rpartition(".")[2]
        if etype == "response.failed" or status == "failed":
            error = resp.get("error")
            err: dict[str, Any] = error if isinstance(error, dict) else {}
            self._fail(
                out,
                str(err.get("code") or "upstream_error"),
                str(err.get("message") or "upstream response failed"),
                error_type=err.get("type") if isinstance(err.get("type"), str) else None,
                extra={X_OBJECT: _template(resp), X_STATUS: "failed"},
            )
            return
        # Completion-only fallback: items the terminal object has but that never streamed.
        items = resp.get("output")
        if isinstance(items, list) and not self._unstreamed(out, items):
            return
        for idx in sorted(self._open):
            self._done(out, idx)
        output = self._acc.output()
        extra: dict[str, Any] = {X_STATUS: status, X_OBJECT: _template(resp)}
        for key in ("error", "incomplete_details"):
            if resp.get(key) is not None:
                extra[key] = resp[key]
        self.finished = True
        out.append(
            ev.ResponseDone(
                output=output,
                usage=decode_usage(resp.get("usage")),
                extra=extra,
                finish_reason=finish_from_status(status, resp.get("incomplete_details"), output),
            )
        )

    def _conflict(self, slot: _Slot, item: dict[str, Any]) -> str | None:
        """What in the terminal object's ``item`` contradicts what was streamed for the same
        item (reference: whitespace-only text differences are tolerated, reasoning summaries and
        encrypted content are authoritative, any other differing non-empty value conflicts)."""
        nodes = self._acc.nodes
        if slot.kind == "call" and slot.node is not None:
            streamed = getattr(nodes.get(slot.node), "arguments", "") or ""
            final = item.get("arguments", item.get("input"))
            if isinstance(final, str) and final and streamed and final != streamed:
                return f"arguments of item {item.get('id')}"
        elif slot.kind == "message" and slot.parts:
            texts = [
                c.get("text") or c.get("refusal") for c in item.get("content") or [] if isinstance(c, dict)
            ]
            for ci, idx in slot.parts.items():
                streamed = getattr(nodes.get(idx), "content", "") or ""
                final = texts[ci] if ci < len(texts) else None
                if (
                    isinstance(final, str)
                    and final
                    and streamed
                    and "".join(final.split()) != "".join(streamed.split())
                ):
                    return f"text of item {item.get('id')}"
        return None

    def close(self) -> list[ev.Event]:
        if self.finished:
            return []
        out: list[ev.Event] = []
        self._fail(out, "upstream_stream_incomplete", "upstream stream ended before a terminal event")
        return out
