"""URP -> Chat Completions wire, field by field: parts, reasoning entries, messages, tools.

Encoders group the flat node list into messages. On a same-Chat hop the ``_gw_chat_*`` markers
left by the decoder restore exact message boundaries, content shapes and raw reasoning entries,
so decode -> encode gives back an equal body.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from gateway.urp import (
    AudioNode,
    EnvelopeExtraNode,
    FileNode,
    ImageNode,
    Node,
    ProviderItemNode,
    ReasoningNode,
    RefusalNode,
    TextNode,
    ToolCallNode,
    ToolDef,
    ToolResultNode,
    wire_extra,
)
from gateway.urp.presentation import SUMMARY_AS_CHAT_CONTENT, chat_reasoning_content

from ..base import put_extra, without_internal
from .common import (
    FILE_ID_ORIGIN,
    INNER_EXTRA,
    LEGACY_FUNCTION,
    LEGACY_PREFIX,
    MESSAGE_AUDIO,
    MSG_SHAPE,
    PROTOCOL,
    REASONING_DETAIL,
    REASONING_SURFACE,
    RESULT_SHAPE,
    data_url,
    encode_usage,
    raw_details,
)
from .decode import reasoning_from_detail

PART_TYPE = "_gw_chat_part_type"
_ASSISTANT_ONLY = (ReasoningNode, RefusalNode, ToolCallNode)  # a tuple: isinstance on a union is slower
_AUDIO_FORMATS = {"wav": "wav", "x-wav": "wav", "wave": "wav", "mp3": "mp3", "mpeg": "mp3"}


def _inner(base: dict[str, Any], node: Node) -> dict[str, Any]:
    if not node.extra:
        return base
    inner = node.extra.get(INNER_EXTRA)
    if inner:
        put_extra(base, inner)
    return base


# -- parts --------------------------------------------------------------------------------


def encode_part(node: Node, same: bool, keep_extra: bool = True) -> dict[str, Any] | None:
    """One content node -> Chat part, or None when Chat cannot express it. ``keep_extra``:
    merge the node's preserved wire fields (off for another family's response nodes, whose
    fields mean nothing in Chat; request nodes were already stripped by prepare)."""
    if isinstance(node, TextNode):
        ptype = node.extra.get(PART_TYPE, "text") if same else "text"
        part: dict[str, Any] = {"type": ptype, "text": node.content}
    elif isinstance(node, ImageNode):
        src = node.source
        if src.kind == "url" and src.url:
            inner: dict[str, Any] = {"url": src.url}
        elif src.kind == "base64" and src.data:
            inner = {"url": data_url(src.media_type or "image/png", src.data)}
        else:
            return None  # file ids cannot be sent as Chat images
        if src.detail is not None:
            inner["detail"] = src.detail
        part = {"type": "image_url", "image_url": _inner(inner, node)}
    elif isinstance(node, AudioNode):
        src = node.source
        if src.kind != "base64" or not src.data:
            return None
        sub = (src.media_type or "").rpartition("/")[2]
        fmt = _AUDIO_FORMATS.get(sub) or (sub if same and sub else None)
        if fmt is None:
            return None
        part = {"type": "input_audio", "input_audio": _inner({"data": src.data, "format": fmt}, node)}
    elif isinstance(node, FileNode):
        src = node.source
        if src.kind == "file_id" and src.file_id and node.extra.get(FILE_ID_ORIGIN) == "openai":
            inner = {"file_id": src.file_id}
        elif src.kind == "base64" and src.data:
            inner = {"file_data": data_url(src.media_type, src.data) if src.media_type else src.data}
        else:
            return None  # URL / text files: no Chat shape, never synthesised into text
        if src.filename is not None:
            inner["filename"] = src.filename
        part = {"type": "file", "file": _inner(inner, node)}
    elif isinstance(node, ProviderItemNode):
        if node.origin_protocol != PROTOCOL or node.item_type == MESSAGE_AUDIO:
            return None
        return without_internal(node.body)
    else:
        return None
    if keep_extra and node.extra:
        put_extra(part, node.extra)
    return part


def _plain_text(part: dict[str, Any]) -> bool:
    return len(part) == 2 and part.get("type") == "text"


def _content(parts: list[dict[str, Any]], shape: str | None) -> Any:
    """Chat content value: a bare string for one extra-free text part, else the part array."""
    if not parts:
        if shape == "array":
            return []
        if shape == "string":
            return ""
        return None
    if shape != "array" and len(parts) == 1 and _plain_text(parts[0]):
        return parts[0]["text"]
    return parts


# -- reasoning ----------------------------------------------------------------------------


def reasoning_entries(node: ReasoningNode, start: int) -> list[dict[str, Any]]:
    """Synthesised OpenRouter entries for a node without a raw Chat entry: text, summary and
    the encrypted payload each get their own entry (never merged)."""
    out: list[dict[str, Any]] = []
    if node.content:
        out.append({"type": "reasoning.text", "text": node.content})
    if node.summary:
        out.append({"type": "reasoning.summary", "summary": node.summary})
    if node.encrypted is not None and node.encrypted != "":
        out.append({"type": "reasoning.encrypted", "data": node.encrypted})
    rid, fmt = node.id, node.source
    for i, entry in enumerate(out, start):
        if rid:
            entry["id"] = rid
        if fmt:
            entry["format"] = fmt
        entry["index"] = i
    return out


def raw_detail_matches(node: ReasoningNode, raw: Any) -> bool:
    """True while the node still says what its raw ``reasoning_details`` entries say, so they
    can be replayed exactly; a transform that rewrote the node wins over the raw entries. A
    text entry with the encrypted entry folded into it (a list) says the text of the first and
    the payload of the second."""
    entries = raw_details(raw)
    if not entries:
        return False
    ref = reasoning_from_detail(entries[0])
    for extra in entries[1:]:
        ref.encrypted = reasoning_from_detail(extra).encrypted
    return (ref.content, ref.summary, ref.encrypted) == (node.content, node.summary, node.encrypted)


class _Message:
    """An assistant/user/system/developer message being assembled."""

    __slots__ = (
        "role",
        "parts",
        "shape",
        "details",
        "scalars",
        "refusal",
        "calls",
        "function_call",
        "audio",
        "env",
        "plaintext",
        "phase",
    )

    def __init__(self, role: str, shape: str | None, env: dict[str, Any]) -> None:
        self.role = role
        self.parts: list[dict[str, Any]] = []
        self.shape = shape
        self.details: list[dict[str, Any]] = []
        self.scalars: dict[str, str] = {}
        self.refusal: str | None = None
        self.calls: list[dict[str, Any]] = []
        self.function_call: dict[str, Any] | None = None
        self.audio: Any = None
        self.env = env
        self.plaintext: list[str] = []
        self.phase: str | None = None

    def add_reasoning(self, node: ReasoningNode) -> None:
        shown = chat_reasoning_content(node)  # set by reasoning presentation transforms
        if shown is not None and not (
            node.extra.get(REASONING_SURFACE) == "reasoning_content" and shown == node.content
        ):
            self.scalars["reasoning_content"] = self.scalars.get("reasoning_content", "") + shown
            if node.extra.get(SUMMARY_AS_CHAT_CONTENT) and node.summary:
                node = replace(node, summary=None)  # shown as reasoning_content instead of a detail
        raw = node.extra.get(REASONING_DETAIL)
        if raw is not None and raw_detail_matches(node, raw):
            self.details.extend(without_internal(entry) for entry in raw_details(raw))
            return
        surface = node.extra.get(REASONING_SURFACE)
        if (
            surface in ("reasoning", "reasoning_content")
            and not node.summary
            and node.encrypted in (None, "")
        ):
            self.scalars[surface] = self.scalars.get(surface, "") + (node.content or "")
            return
        self.details.extend(reasoning_entries(node, len(self.details)))
        text = node.content or node.summary
        if text:
            self.plaintext.append(text)

    def build(self, *, response: bool) -> dict[str, Any]:
        msg: dict[str, Any] = {"role": self.role}
        if response:
            texts = [p["text"] for p in self.parts if p.get("type") == "text"]
            if len(texts) == len(self.parts):
                msg["content"] = "\n\n".join(texts) if texts else (None if self.shape != "string" else "")
            else:
                msg["content"] = self.parts
        else:
            content = _content(self.parts, self.shape)
            if (
                isinstance(content, list)
                and len(content) > 1
                and self.shape != "array"
                and self.role in ("system", "developer")
                and all(_plain_text(p) for p in content)
            ):
                # Several plain system segments (an injected prompt next to the client's string,
                # or folded system nodes): one string, as the client sent it or as any server
                # takes it; some OpenAI-compatible servers reject a system part array.
                content = "\n\n".join(p["text"] for p in content)
            if content is not None or self.shape != "absent":
                if content is None and self.role != "assistant":
                    content = ""
                msg["content"] = content
        if self.refusal is not None:
            msg["refusal"] = self.refusal
        msg.update(self.scalars)
        if response and self.plaintext and "reasoning" not in msg:
            msg["reasoning"] = "".join(self.plaintext)
        if self.details:
            msg["reasoning_details"] = self.details
        if self.calls:
            msg["tool_calls"] = self.calls
        if self.function_call is not None:
            msg["function_call"] = self.function_call
        if self.audio is not None:
            msg["audio"] = self.audio
        if self.phase is not None:
            msg["phase"] = self.phase
        if self.env:
            put_extra(msg, self.env)
        return msg


def encode_tool_call(node: ToolCallNode, same: bool, keep_extra: bool = True) -> dict[str, Any]:
    if node.tool_type == "custom":
        call: dict[str, Any] = {
            "id": node.call_id,
            "type": "custom",
            "custom": _inner({"name": node.name, "input": node.arguments}, node),
        }
    else:
        call = {
            "id": node.call_id,
            "type": "function",
            "function": _inner({"name": node.name, "arguments": node.arguments}, node),
        }
        if same and node.extra.get("_gw_chat_no_type"):
            del call["type"]
    if keep_extra and node.extra:
        put_extra(call, node.extra)
    return call


def _tool_message(node: ToolResultNode, same: bool, env: dict[str, Any]) -> dict[str, Any]:
    content_nodes = node.content
    if not same and len(content_nodes) == 1:
        only = content_nodes[0]
        if only.__class__ is TextNode and not only.extra:
            # The commonest cross-family result (one plain text): its string, without building
            # the part the general path below would build and unwrap again.
            msg: dict[str, Any] = {"role": "tool", "tool_call_id": node.call_id, "content": only.content}
            if env:
                put_extra(msg, env)
            return msg
    parts: list[dict[str, Any]] = []
    for c in node.content:
        p = encode_part(c, same)
        if p is not None:
            parts.append(p)
    if same and node.extra.get(LEGACY_FUNCTION) and node.call_id.startswith(LEGACY_PREFIX):
        msg = {
            "role": "function",
            "name": node.call_id[len(LEGACY_PREFIX) :],
            "content": "".join(p.get("text", "") for p in parts),
        }
    else:
        shape = node.extra.get(RESULT_SHAPE) if same else None
        if shape == "null" and not parts:
            content: Any = None
        elif shape != "array" and all(_plain_text(p) for p in parts):
            if len(parts) <= 1:
                content = parts[0]["text"] if parts else ""
            else:
                content = "\n\n".join(p["text"] for p in parts) if not same else parts
        else:
            content = parts
        msg = {"role": "tool", "tool_call_id": node.call_id, "content": content}
    if env:
        put_extra(msg, env)
    return msg


def _add_to_message(
    cur: _Message, node: Node, part: dict[str, Any] | None, same: bool, keep_extra: bool
) -> None:
    """Put one node into the message being built: a content part, reasoning, refusal, a tool
    call (or a legacy function call on a same-Chat hop) or message audio."""
    if part is not None:
        cur.parts.append(part)
        if same and isinstance(node, TextNode) and node.phase is not None:
            cur.phase = node.phase  # phase is never synthesised cross-family
    elif isinstance(node, ReasoningNode):
        cur.add_reasoning(node)
    elif isinstance(node, RefusalNode):
        cur.refusal = (cur.refusal or "") + node.content
    elif isinstance(node, ToolCallNode):
        if same and node.extra.get(LEGACY_FUNCTION):
            cur.function_call = {"name": node.name, "arguments": node.arguments}
        else:
            cur.calls.append(encode_tool_call(node, same, keep_extra))
    elif isinstance(node, ProviderItemNode):
        cur.audio = without_internal(node.body)


def encode_messages(nodes: list[Node], same: bool, *, response: bool = False) -> list[dict[str, Any]]:
    """Group flat nodes into Chat messages: consecutive same-role nodes merge, tool calls attach
    to the assistant message, every tool result is its own ``tool`` message, envelope extras
    apply to the next message emitted."""
    out: list[dict[str, Any]] = []
    cur: _Message | None = None
    env: dict[str, Any] = {}
    keep_extra = same or not response
    for node in nodes:
        if isinstance(node, EnvelopeExtraNode):
            if cur is not None:
                out.append(cur.build(response=response))
                cur = None
            if same or not response:  # another family's response envelope fields mean nothing here
                env.update(node.extra)
            continue
        if isinstance(node, ToolResultNode):
            if cur is not None:
                out.append(cur.build(response=response))
                cur = None
            out.append(_tool_message(node, same, env))
            env = {}
            continue
        part = None
        if isinstance(node, _ASSISTANT_ONLY):
            role = "assistant"
        elif isinstance(node, ProviderItemNode) and node.item_type == MESSAGE_AUDIO:
            if node.origin_protocol != PROTOCOL:
                continue
            role = "assistant"
        else:
            part = encode_part(node, same, keep_extra)
            if part is None:
                continue  # nothing Chat can express: it must not open a message either
            role = getattr(node, "role", "user")
            if role not in ("system", "developer", "user", "assistant"):
                role = "user"
        shape = node.extra.get(MSG_SHAPE) if same else None
        if cur is None or cur.role != role or shape is not None:
            if cur is not None:
                out.append(cur.build(response=response))
            cur = _Message(role, shape, env)
            env = {}
        _add_to_message(cur, node, part, same, keep_extra)
    if cur is not None:
        out.append(cur.build(response=response))
    return out


# -- tools --------------------------------------------------------------------------------


def encode_tool(tool: ToolDef) -> dict[str, Any] | None:
    if tool.kind == "function":
        fn: dict[str, Any] = {"name": tool.name}
        if tool.description is not None:
            fn["description"] = tool.description
        if tool.parameters is not None:
            fn["parameters"] = tool.parameters
        if tool.strict is not None:
            fn["strict"] = tool.strict
        put_extra(fn, tool.inner_extra)
        out: dict[str, Any] = {"type": "function", "function": fn}
    elif tool.kind == "custom":
        cu: dict[str, Any] = {"name": tool.name}
        if tool.description is not None:
            cu["description"] = tool.description
        if tool.format is not None:
            cu["format"] = tool.format
        put_extra(cu, tool.inner_extra)
        out = {"type": "custom", "custom": cu}
    elif tool.origin_protocol == PROTOCOL:
        out = {"type": tool.kind}
    else:
        return None  # namespaces and other families' native tools have no Chat shape
    put_extra(out, tool.extra)
    return out


def encode_response_format(rf) -> dict[str, Any]:
    if rf.type != "json_schema":
        out: dict[str, Any] = {"type": rf.type}
        put_extra(out, rf.extra)
        return out
    js: dict[str, Any] = {"name": rf.name or "response"}
    if rf.description is not None:
        js["description"] = rf.description
    if rf.schema is not None:
        js["schema"] = rf.schema
    if rf.strict is not None:
        js["strict"] = rf.strict
    put_extra(js, rf.extra)
    return {"type": "json_schema", "json_schema": js}


__all__ = ["encode_messages", "encode_tool", "encode_usage", "wire_extra"]
