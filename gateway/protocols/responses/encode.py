"""Responses items out: URP nodes -> Responses input/output items, shared by the request codec
(``input``), the response codec (``output``) and the streams. The markers it reads and the
decoder it mirrors are in ``common.py``; split from there to keep each module small.
"""

from __future__ import annotations

from typing import Any

from gateway.urp.nodes import (
    AudioNode,
    EnvelopeExtraNode,
    FileNode,
    ImageNode,
    MediaSource,
    Node,
    ProviderItemNode,
    ReasoningNode,
    RefusalNode,
    TextNode,
    ToolCallNode,
    ToolResultNode,
    wire_extra,
)

from ..base import json_text, new_id, put_extra, without_internal
from .common import (
    BREAKPOINT,
    DOWNSTREAM_ONLY,
    FILE_ID_ORIGIN,
    M_BODY,
    M_CONTENT,
    M_IS_PART,
    M_ITEM,
    M_OUTPUT,
    M_PART,
    M_SUMMARY,
    PROTOCOL,
    SUMMARY_SEP,
    TEXT_PART_TYPES,
)


def _data_url(src: MediaSource) -> str:
    return f"data:{src.media_type};base64,{src.data}" if src.media_type else (src.data or "")


def encode_part(node: Node, same: bool, output: bool) -> dict[str, Any] | None:
    """One content part, or None when Responses cannot express the node."""
    if isinstance(node, TextNode):
        ptype = node.extra.get(M_PART) or ("output_text" if node.role == "assistant" else "input_text")
        if ptype == "_empty":
            return None
        part: dict[str, Any] = {"type": ptype, "text": node.content}
        if output and ptype == "output_text" and "annotations" not in node.extra:
            part["annotations"] = []
        return put_extra(part, node.extra)
    if isinstance(node, RefusalNode):
        return put_extra({"type": "refusal", "refusal": node.content}, node.extra)
    if isinstance(node, ImageNode):
        src = node.source
        part = {"type": "input_image"}
        if src.kind == "url" and src.url is not None:
            part["image_url"] = src.url
        elif src.kind == "base64" and src.data is not None:
            part["image_url"] = _data_url(src) if src.media_type else f"data:image/png;base64,{src.data}"
        elif src.kind == "file_id" and src.file_id and node.extra.get(FILE_ID_ORIGIN, "openai") == "openai":
            part["file_id"] = src.file_id
        else:
            return None
        if src.detail is not None:
            part["detail"] = src.detail
        elif not same:
            part["detail"] = "auto"
        return put_extra(part, node.extra)
    if isinstance(node, FileNode):
        src = node.source
        part = {"type": "input_file"}
        if src.kind == "file_id" and src.file_id and node.extra.get(FILE_ID_ORIGIN, "openai") == "openai":
            part["file_id"] = src.file_id
        elif src.kind == "base64" and src.data is not None:
            part["file_data"] = (
                _data_url(src)
                if (same or src.media_type)
                else f"data:application/octet-stream;base64,{src.data}"
            )
        elif src.kind == "url" and src.url is not None:
            part["file_url"] = src.url
        else:
            return None
        if src.filename is not None:
            part["filename"] = src.filename
        return put_extra(part, node.extra)
    if isinstance(node, ProviderItemNode) and node.origin_protocol == PROTOCOL:
        return without_internal(node.body)
    return None


def _is_part_node(node: Node) -> bool:
    t = type(node)
    if t is TextNode or t is RefusalNode or t is ImageNode or t is FileNode:
        return True
    return t is ProviderItemNode and M_IS_PART in node.extra


def _reasoning_parts(raw: Any, text: str | None, ptype: str, sep: str = "") -> list[dict[str, Any]]:
    """Replay the raw part list when the joined text is unchanged (keeps part boundaries)."""
    if isinstance(raw, list):
        if sep.join(p.get("text", "") for p in raw if isinstance(p, dict)) == (text or ""):
            return raw
    return [{"type": ptype, "text": text}] if text else []


def encode_reasoning(node: ReasoningNode, same: bool, output: bool) -> dict[str, Any] | None:
    """A reasoning item, or None when there is nothing meaningful (or it must not be replayed)."""
    if node.extra.get(DOWNSTREAM_ONLY) and not output:
        return None
    if not same and not output and not node.id:
        # A foreign reasoning node without a Responses item id cannot be replayed to a
        # Responses upstream (encrypted content is bound to the item id); skip it.
        return None
    if output and not (node.content or node.summary or node.encrypted):
        return None
    item: dict[str, Any] = {"type": "reasoning"}
    if node.id:
        item["id"] = node.id
    elif output:
        item["id"] = new_id("rs_")
    item["summary"] = _reasoning_parts(node.extra.get(M_SUMMARY), node.summary, "summary_text", SUMMARY_SEP)
    if node.content is not None or M_CONTENT in node.extra:
        item["content"] = _reasoning_parts(node.extra.get(M_CONTENT), node.content, "reasoning_text")
    if node.encrypted is not None:
        enc = node.encrypted
        item["encrypted_content"] = json_text(enc)
    if same:
        put_extra(item, node.extra)
    return item


def encode_tool_call(node: ToolCallNode, same: bool, output: bool) -> dict[str, Any]:
    custom = node.tool_type == "custom"
    item: dict[str, Any] = {"type": "custom_tool_call" if custom else "function_call"}
    if node.id and (same or node.id.startswith("fc_" if not custom else "ctc_")):
        item["id"] = node.id
    elif output:
        item["id"] = new_id("ctc_" if custom else "fc_")
    if output and not custom and "status" not in node.extra:
        item["status"] = "completed"
    item["call_id"] = node.call_id
    if node.namespace is not None:
        item["namespace"] = node.namespace
    item["name"] = node.name
    item["input" if custom else "arguments"] = node.arguments
    if same:
        put_extra(item, node.extra)
    return item


def encode_tool_result(node: ToolResultNode, same: bool) -> dict[str, Any]:
    item: dict[str, Any] = {
        "type": "custom_tool_call_output" if node.tool_type == "custom" else "function_call_output"
    }
    if node.id and same:
        item["id"] = node.id
    item["call_id"] = node.call_id
    shape = node.extra.get(M_OUTPUT)
    content = node.content
    if (
        shape is None
        and len(content) == 1
        and type(content[0]) is TextNode
        and not wire_extra(content[0].extra)
    ):
        item["output"] = content[0].content
    elif shape is None and not content:
        item["output"] = ""
    else:
        parts = []
        for n in content:
            if type(n) is TextNode:
                p: dict[str, Any] = {"type": "input_text", "text": n.content}
                if M_PART in n.extra:
                    p["type"] = n.extra[M_PART]
                if same:
                    put_extra(p, n.extra)
                elif BREAKPOINT in n.extra:  # cache_openai_tool_use marks entries on any hop
                    p[BREAKPOINT] = n.extra[BREAKPOINT]
                parts.append(p)
            else:
                encoded = encode_part(n, same, False)
                if encoded is not None:
                    parts.append(encoded)
        item["output"] = parts[0] if shape == "object" and len(parts) == 1 else parts
    if same:
        put_extra(item, node.extra)
    return item


class _Message:
    __slots__ = ("role", "phase", "id", "parts", "flags", "nodes")

    def __init__(self, role: str, phase: str | None, item_id: str | None, flags: dict | None) -> None:
        self.role = role
        self.phase = phase
        self.id = item_id
        self.parts: list[dict[str, Any]] = []
        self.flags = flags
        self.nodes = 0


class _ItemWriter:
    """The grouping state of ``encode_items``: the items written so far, the envelope extras
    waiting for the next item, and the message item being filled."""

    __slots__ = ("same", "output", "phases", "items", "env", "cur")

    def __init__(self, same: bool, output: bool, phases: frozenset[str] | None) -> None:
        self.same = same
        self.output = output
        self.phases = phases
        self.items: list[dict[str, Any]] = []
        self.env: dict[str, Any] = {}
        self.cur: _Message | None = None

    def flush(self) -> None:
        """Close the open message item (if it has anything to say) and append it."""
        same, output = self.same, self.output
        if self.cur is None:
            return
        m, self.cur = self.cur, None
        if not m.parts and m.flags is None:
            return
        item: dict[str, Any] = {}
        flags = m.flags
        if flags is None or flags.get("t", True) or not same:
            item["type"] = "message"
        if m.id is not None and (same or output):
            item["id"] = m.id
        elif output:
            item["id"] = new_id("msg_")
        if same and flags and "st" in flags:
            item["status"] = flags["st"]
        elif output:
            item["status"] = "completed"
        item["role"] = m.role
        parts = m.parts
        if (
            same
            and flags
            and flags.get("s")
            and len(parts) == 1
            and parts[0].get("type") in TEXT_PART_TYPES
            and len(parts[0]) == 2
        ):
            item["content"] = parts[0]["text"]
        else:
            item["content"] = parts
        if m.phase is not None:
            item["phase"] = m.phase
        if self.env:
            put_extra(item, self.env)
            self.env = {}
        self.items.append(item)

    def part(self, node: Any, t: type) -> None:
        """A message-compatible node: joins the open message item or starts a new one."""
        same, output, phases = self.same, self.output, self.phases
        if t is ProviderItemNode and node.origin_protocol != PROTOCOL:
            return
        role = node.role if t is not RefusalNode else "assistant"
        if role == "tool":
            role = "user"
        if role == "assistant" and (t is ImageNode or t is FileNode):
            # Assistant messages carry only output_text/refusal; a generated image in a
            # response becomes the native image_generation_call item.
            if output and t is ImageNode and node.source.kind == "base64":
                self.flush()
                self.items.append(
                    node.extra.get(M_BODY)
                    if same and M_BODY in node.extra
                    else {
                        "type": "image_generation_call",
                        "id": node.id or new_id("ig_"),
                        "status": "completed",
                        "result": node.source.data,
                    }
                )
            return
        phase = node.phase if t is TextNode else None
        if phases is not None and phase not in phases:
            phase = None
        starts = M_ITEM in node.extra and same
        cur = self.cur
        if (
            cur is None
            or starts
            or role != cur.role
            or (phase is not None and phase != cur.phase)
            or (node.id is not None and cur.id is not None and node.id != cur.id)
        ):
            self.flush()
            cur = self.cur = _Message(
                role, phase, node.id if same or output else None, node.extra.get(M_ITEM) if same else None
            )
        elif phase is not None and cur.phase is None:
            cur.phase = phase
        if cur.id is None and node.id is not None and (same or output):
            cur.id = node.id
        part = encode_part(node, same, output)
        if part is not None:
            cur.parts.append(part)
        cur.nodes += 1

    def item(self, node: Any, t: type) -> None:
        """A node that is an item of its own: tool call, tool result, reasoning, provider item."""
        same, output = self.same, self.output
        if t is ToolCallNode:
            self.items.append(encode_tool_call(node, same, output))
        elif t is ToolResultNode:
            item = encode_tool_result(node, same)
            if self.env:
                put_extra(item, self.env)
                self.env = {}
            self.items.append(item)
        elif t is ReasoningNode:
            reasoning = encode_reasoning(node, same, output)
            if reasoning is not None:
                self.items.append(reasoning)
        elif t is ProviderItemNode:
            if node.origin_protocol == PROTOCOL:
                self.items.append(without_internal(node.body))
        elif t is AudioNode:
            return  # Responses has no audio input part


def encode_items(
    nodes: list[Node], *, same: bool, output: bool, phases: frozenset[str] | None = None
) -> list[dict[str, Any]]:
    """Group flat nodes into Responses items.

    Contiguous message-compatible nodes of one role, phase and item id form one ``message``
    item; a node that started an item on the wire (``M_ITEM``), a control node, or any
    reasoning/tool/provider item closes it. ``output`` fills the fields a response object needs
    (ids, status, annotations); ``phases`` (when given) is the set of phases forwarded.
    """
    writer = _ItemWriter(same, output, phases)
    for node in nodes:
        t = type(node)
        if t is EnvelopeExtraNode:
            writer.flush()
            if same:
                writer.env.update(wire_extra(node.extra))
        elif _is_part_node(node):
            writer.part(node, t)
        else:
            writer.flush()
            writer.item(node, t)
    writer.flush()
    return writer.items
