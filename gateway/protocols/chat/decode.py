"""Chat Completions wire -> URP, field by field: parts, reasoning entries, messages, tools.

Decoding is flat: every message becomes a run of nodes in source order; only encoders group.
Whatever a same-Chat hop needs to rebuild the exact wire body (content shape, raw reasoning
entries, which max-tokens key was used...) rides along under ``_gw_chat_*`` internal keys.
"""

from __future__ import annotations

from typing import Any

import orjson

from gateway.errors import ProtocolError
from gateway.urp import (
    AudioNode,
    EnvelopeExtraNode,
    FileNode,
    ImageNode,
    MediaSource,
    Node,
    ProviderItemNode,
    ReasoningNode,
    RefusalNode,
    ResponseFormat,
    TextNode,
    ToolCallNode,
    ToolDef,
    ToolResultNode,
    accept_extra,
)
from gateway.urp.request import REASONING_EFFORTS

from ..base import json_text, split_data_url
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
    folds_into,
)

_MESSAGE_KEYS = frozenset(
    {
        "role",
        "content",
        "tool_calls",
        "tool_call_id",
        "refusal",
        "reasoning_details",
        "reasoning",
        "reasoning_content",
        "audio",
        "function_call",
        "name",
    }
)
_TOOL_CALL_KEYS = frozenset({"id", "type", "function", "custom"})
_ORDINARY_ROLES = frozenset({"system", "developer", "user", "assistant"})


def normalise_effort(value: Any) -> str | None:
    """Map a reasoning effort string onto URP's scale (``minimum`` -> ``minimal``)."""
    if not isinstance(value, str):
        return None
    value = value.lower()
    if value == "minimum":
        return "minimal"
    return value if value in REASONING_EFFORTS else None


# -- parts --------------------------------------------------------------------------------


def _inner(obj: dict[str, Any], known: frozenset[str], node_extra: dict[str, Any]) -> None:
    """Unknown keys of a part's inner object live under one internal key of the node."""
    rest = accept_extra(obj, known)
    if rest:
        node_extra[INNER_EXTRA] = rest


_IMAGE_URL_KEYS = frozenset({"url", "detail"})
_AUDIO_KEYS = frozenset({"data", "format"})
_FILE_KEYS = frozenset({"file_id", "file_data", "filename"})


def _decode_file_part(part: dict, role: str, where: str) -> FileNode:
    """A ``file`` part: by OpenAI file id, or inline as a data URL or bare base64."""
    inner = part.get("file")
    if not isinstance(inner, dict):
        raise ProtocolError("file part needs a 'file' object", param=f"{where}.file")
    extra = accept_extra(part, {"type", "file"})
    _inner(inner, _FILE_KEYS, extra)
    if isinstance(inner.get("file_id"), str):
        extra[FILE_ID_ORIGIN] = "openai"
        source = MediaSource(kind="file_id", file_id=inner["file_id"], filename=inner.get("filename"))
    elif isinstance(inner.get("file_data"), str):
        raw = inner["file_data"]
        split = split_data_url(raw)
        if split:
            source = MediaSource(
                kind="base64", media_type=split[0], data=split[1], filename=inner.get("filename")
            )
        else:  # bare base64: the media type is unknown
            source = MediaSource(kind="base64", data=raw, filename=inner.get("filename"))
    else:
        raise ProtocolError("file part needs file_id or file_data", param=f"{where}.file")
    return FileNode(role=role, source=source, extra=extra)


def decode_part(part: Any, role: str, where: str) -> Node:
    """One Chat content part -> node. Unknown part types become ProviderItemNodes so they replay
    only to a Chat upstream (never stringified)."""
    if not isinstance(part, dict):
        raise ProtocolError("content part must be an object", param=where)
    ptype = part.get("type")
    if ptype in ("text", "output_text", "input_text"):
        text = part.get("text")
        if not isinstance(text, str):
            raise ProtocolError("text part needs a string 'text'", param=f"{where}.text")
        extra = accept_extra(part, {"type", "text"})
        if ptype != "text":
            extra["_gw_chat_part_type"] = ptype
        return TextNode(role=role, content=text, extra=extra)
    if ptype == "image_url":
        inner = part.get("image_url")
        if isinstance(inner, str):
            inner = {"url": inner}
        if not isinstance(inner, dict) or not isinstance(inner.get("url"), str):
            raise ProtocolError("image_url part needs image_url.url", param=f"{where}.image_url")
        extra = accept_extra(part, {"type", "image_url"})
        _inner(inner, _IMAGE_URL_KEYS, extra)
        return ImageNode(
            role=role,
            source=MediaSource(kind="url", url=inner["url"], detail=inner.get("detail")),
            extra=extra,
        )
    if ptype == "input_audio":
        inner = part.get("input_audio")
        if not isinstance(inner, dict) or not isinstance(inner.get("data"), str):
            raise ProtocolError("input_audio part needs input_audio.data", param=f"{where}.input_audio")
        fmt = inner.get("format")
        extra = accept_extra(part, {"type", "input_audio"})
        _inner(inner, _AUDIO_KEYS, extra)
        return AudioNode(
            role=role,
            source=MediaSource(
                kind="base64", data=inner["data"], media_type=f"audio/{fmt}" if isinstance(fmt, str) else None
            ),
            extra=extra,
        )
    if ptype == "file":
        return _decode_file_part(part, role, where)
    if not isinstance(ptype, str):
        raise ProtocolError("content part needs a string 'type'", param=f"{where}.type")
    return ProviderItemNode(origin_protocol=PROTOCOL, item_type=ptype, body=dict(part), role=role)


# -- reasoning ----------------------------------------------------------------------------


def reasoning_from_detail(entry: dict[str, Any]) -> ReasoningNode:
    """One OpenRouter ``reasoning_details[]`` entry -> one node; the raw entry is kept for an
    exact same-Chat replay (ids, formats, signatures, order), less any spoofed internal marker.
    Only string signatures and payloads become the node's opaque reasoning."""
    dtype = entry.get("type")
    node = ReasoningNode(extra={REASONING_DETAIL: accept_extra(entry, ())})
    if isinstance(entry.get("id"), str):
        node.id = entry["id"]
    if isinstance(entry.get("format"), str) and entry["format"]:
        node.source = entry["format"]
    if dtype == "reasoning.text":
        node.content = entry.get("text") if isinstance(entry.get("text"), str) else ""
        if isinstance(entry.get("signature"), str) and entry["signature"]:
            node.encrypted = entry["signature"]
    elif dtype == "reasoning.summary":
        node.summary = entry.get("summary") if isinstance(entry.get("summary"), str) else ""
    elif dtype == "reasoning.encrypted" and isinstance(entry.get("data"), str):
        node.encrypted = entry["data"]
    return node


def _reasoning_nodes(msg: dict[str, Any], env: dict[str, Any]) -> list[Node]:
    details = msg.get("reasoning_details")
    if isinstance(details, list) and details:
        # details win; the legacy scalars are kept as envelope fields so a same-Chat hop keeps them
        for key in ("reasoning", "reasoning_content"):
            if key in msg:
                env[key] = msg[key]
        nodes: list[Node] = []
        for entry in details:
            if not isinstance(entry, dict):
                continue
            prev = nodes[-1] if nodes else None
            prev_raw = prev.extra.get(REASONING_DETAIL) if isinstance(prev, ReasoningNode) else None
            if prev is not None and folds_into(prev_raw, prev, entry):
                folded = reasoning_from_detail(entry)
                prev.encrypted = folded.encrypted
                prev.extra[REASONING_DETAIL] = [prev_raw, folded.extra[REASONING_DETAIL]]
                continue
            nodes.append(reasoning_from_detail(entry))
        return nodes
    if "reasoning_details" in msg:
        env["reasoning_details"] = details
    nodes: list[Node] = []
    for key in ("reasoning_content", "reasoning"):
        value = msg.get(key)
        if isinstance(value, str):
            nodes.append(ReasoningNode(content=value, extra={REASONING_SURFACE: key}))
        elif key in msg:
            env[key] = value
    return nodes


# -- messages -----------------------------------------------------------------------------


def _tool_call(call: Any, where: str) -> ToolCallNode:
    if not isinstance(call, dict):
        raise ProtocolError("tool call must be an object", param=where)
    call_id = call.get("id")
    if not isinstance(call_id, str) or not call_id:
        raise ProtocolError("tool call needs a non-empty 'id'", param=f"{where}.id")
    ctype = call.get("type", "function")
    extra = accept_extra(call, _TOOL_CALL_KEYS)
    if "type" not in call:
        extra["_gw_chat_no_type"] = True
    if ctype == "custom":
        inner = call.get("custom")
        if not isinstance(inner, dict) or not isinstance(inner.get("name"), str):
            raise ProtocolError("custom tool call needs custom.name", param=f"{where}.custom")
        _inner(inner, frozenset({"name", "input"}), extra)
        args = inner.get("input", "")
        return ToolCallNode(
            call_id=call_id, name=inner["name"], tool_type="custom", arguments=json_text(args), extra=extra
        )
    inner = call.get("function")
    if not isinstance(inner, dict) or not isinstance(inner.get("name"), str):
        raise ProtocolError("tool call needs function.name", param=f"{where}.function")
    _inner(inner, frozenset({"name", "arguments"}), extra)
    return ToolCallNode(
        call_id=call_id, name=inner["name"], arguments=json_text(inner.get("arguments", "")), extra=extra
    )


def _content_nodes(content: Any, role: str, where: str) -> tuple[list[Node], str]:
    """Message content -> nodes plus the wire shape (for a lossless same-Chat replay)."""
    if content is None:
        return [], "null"
    if isinstance(content, str):
        return [TextNode(role=role, content=content)], "string"
    if isinstance(content, list):
        return [decode_part(p, role, f"{where}[{i}]") for i, p in enumerate(content)], "array"
    raise ProtocolError("content must be a string, an array of parts or null", param=where)


def _tool_message(
    msg: dict[str, Any], where: str, env: dict[str, Any], call_types: dict[str, str]
) -> list[Node]:
    """A ``role: tool`` message: one ToolResultNode; assistant-only keys ride in the envelope."""
    call_id = msg.get("tool_call_id")
    if not isinstance(call_id, str) or not call_id:
        raise ProtocolError("tool message needs a non-empty 'tool_call_id'", param=f"{where}.tool_call_id")
    content = msg.get("content")
    if isinstance(content, str):
        parts: list[Node] = [TextNode(role="user", content=content)]
        shape = "string"
    elif isinstance(content, list):
        parts = [decode_part(p, "user", f"{where}.content[{i}]") for i, p in enumerate(content)]
        shape = "array"
    elif content is None:
        parts, shape = [], "null"
    else:
        raise ProtocolError("tool content must be a string or an array", param=f"{where}.content")
    for key in (
        "name",
        "refusal",
        "tool_calls",
        "reasoning",
        "reasoning_content",
        "reasoning_details",
        "audio",
        "function_call",
    ):
        if key in msg:
            env[key] = msg[key]
    return [
        ToolResultNode(
            call_id=call_id,
            content=parts,
            tool_type=call_types.get(call_id, "function"),
            extra={RESULT_SHAPE: shape},
        )
    ]


def _function_message(msg: dict[str, Any], where: str) -> list[Node]:
    """A deprecated ``role: function`` message: a legacy ToolResultNode keyed by the function name."""
    name = msg.get("name")
    if not isinstance(name, str) or not name:
        raise ProtocolError("function message needs a 'name'", param=f"{where}.name")
    content = msg.get("content")
    text = (
        content if isinstance(content, str) else ("" if content is None else orjson.dumps(content).decode())
    )
    return [
        ToolResultNode(
            call_id=LEGACY_PREFIX + name,
            content=[TextNode(content=text)],
            extra={LEGACY_FUNCTION: True, RESULT_SHAPE: "string"},
        )
    ]


def _leading_nodes(msg: dict[str, Any], role: str, env: dict[str, Any]) -> list[Node]:
    """What comes before the content: an assistant's reasoning and message audio. Other roles
    carry those keys only in the envelope."""
    nodes: list[Node] = []
    if role == "assistant":
        nodes.extend(_reasoning_nodes(msg, env))
        audio = msg.get("audio")
        if isinstance(audio, dict):
            nodes.append(ProviderItemNode(origin_protocol=PROTOCOL, item_type=MESSAGE_AUDIO, body=audio))
        elif "audio" in msg:
            env["audio"] = audio
    else:
        for key in ("reasoning", "reasoning_content", "reasoning_details", "audio"):
            if key in msg:
                env[key] = msg[key]
    return nodes


def _trailing_nodes(
    msg: dict[str, Any], role: str, where: str, env: dict[str, Any], call_types: dict[str, str]
) -> list[Node]:
    """What comes after the content: refusal, tool calls, legacy function call (assistant only;
    on other roles those keys ride in the envelope)."""
    nodes: list[Node] = []
    if "refusal" not in msg and "tool_calls" not in msg and "function_call" not in msg:
        return nodes  # most messages: none of the three keys, nothing to look at
    refusal = msg.get("refusal")
    if isinstance(refusal, str) and role == "assistant":
        nodes.append(RefusalNode(content=refusal))
    elif "refusal" in msg:
        env["refusal"] = refusal
    calls = msg.get("tool_calls")
    if isinstance(calls, list) and role == "assistant":
        if not calls:
            env["tool_calls"] = calls
        for i, call in enumerate(calls):
            node = _tool_call(call, f"{where}.tool_calls[{i}]")
            call_types[node.call_id] = node.tool_type
            nodes.append(node)
    elif "tool_calls" in msg:
        if calls is not None and role == "assistant":
            raise ProtocolError("tool_calls must be an array", param=f"{where}.tool_calls")
        env["tool_calls"] = calls
    fc = msg.get("function_call")
    if isinstance(fc, dict) and isinstance(fc.get("name"), str) and role == "assistant":
        args = fc.get("arguments", "")
        nodes.append(
            ToolCallNode(
                call_id=LEGACY_PREFIX + fc["name"],
                name=fc["name"],
                arguments=json_text(args),
                extra={LEGACY_FUNCTION: True},
            )
        )
    elif "function_call" in msg:
        env["function_call"] = fc
    return nodes


def _ordinary_message(
    msg: dict[str, Any], role: str, where: str, env: dict[str, Any], call_types: dict[str, str]
) -> list[Node]:
    """A system / developer / user / assistant message."""
    nodes = _leading_nodes(msg, role, env)
    if "content" in msg:
        content_nodes, shape = _content_nodes(msg["content"], role, f"{where}.content")
    elif role == "assistant":
        content_nodes, shape = [], "absent"
    else:
        raise ProtocolError(f"{role} message needs 'content'", param=f"{where}.content")
    nodes.extend(content_nodes)
    nodes.extend(_trailing_nodes(msg, role, where, env, call_types))
    if "name" in msg:
        env["name"] = msg["name"]
    phase = env.get("phase")
    if isinstance(phase, str) and any(isinstance(n, TextNode) for n in content_nodes):
        # a message-level phase (commentary / final_answer) belongs to its text nodes
        for n in content_nodes:
            if isinstance(n, TextNode):
                n.phase = phase
        del env["phase"]
    if nodes:
        nodes[0].extra[MSG_SHAPE] = shape
    return nodes


def decode_message(msg: Any, where: str, call_types: dict[str, str], out: list[Node]) -> None:
    """Append the nodes of one ``messages[]`` entry (or a response ``message``) to ``out``.

    Order: reasoning, message audio, content, refusal, tool calls, legacy function call.
    Unknown message keys (and known keys sent as null) become an EnvelopeExtraNode placed
    right before the message's first node."""
    if not isinstance(msg, dict):
        raise ProtocolError("message must be an object", param=where)
    role = msg.get("role")
    if not isinstance(role, str):
        raise ProtocolError("message 'role' must be a string", param=f"{where}.role")
    env = accept_extra(msg, _MESSAGE_KEYS)
    if role == "tool":
        nodes = _tool_message(msg, where, env, call_types)
    elif role == "function":
        nodes = _function_message(msg, where)
    elif role in _ORDINARY_ROLES:
        nodes = _ordinary_message(msg, role, where, env, call_types)
    else:
        raise ProtocolError(f"unknown message role: {role!r}", param=f"{where}.role")
    if env and nodes:
        out.append(EnvelopeExtraNode(extra=env))
    out.extend(nodes)


# -- tools --------------------------------------------------------------------------------


def decode_tool(tool: Any, where: str) -> ToolDef:
    if not isinstance(tool, dict) or not isinstance(tool.get("type"), str):
        raise ProtocolError("tool must be an object with a 'type'", param=where)
    kind = tool["type"]
    if kind == "function":
        fn = tool.get("function")
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or not fn["name"]:
            raise ProtocolError("function tool needs function.name", param=f"{where}.function.name")
        params = fn.get("parameters")
        if params is not None and not isinstance(params, dict):
            raise ProtocolError("function.parameters must be an object", param=f"{where}.function.parameters")
        return ToolDef(
            kind="function",
            name=fn["name"],
            description=fn.get("description"),
            parameters=params,
            strict=fn.get("strict"),
            extra=accept_extra(tool, {"type", "function"}),
            inner_extra=accept_extra(fn, {"name", "description", "parameters", "strict"}),
        )
    if kind == "custom":
        cu = tool.get("custom")
        if not isinstance(cu, dict) or not isinstance(cu.get("name"), str) or not cu["name"]:
            raise ProtocolError("custom tool needs custom.name", param=f"{where}.custom.name")
        return ToolDef(
            kind="custom",
            name=cu["name"],
            description=cu.get("description"),
            format=cu.get("format"),
            extra=accept_extra(tool, {"type", "custom"}),
            inner_extra=accept_extra(cu, {"name", "description", "format"}),
        )
    return ToolDef(
        kind=kind,
        name=tool.get("name") if isinstance(tool.get("name"), str) else None,
        origin_protocol=PROTOCOL,
        extra=accept_extra(tool, {"type"}),
    )


def decode_response_format(rf: Any) -> ResponseFormat:
    if not isinstance(rf, dict) or rf.get("type") not in ("text", "json_object", "json_schema"):
        raise ProtocolError(
            "response_format.type must be text, json_object or json_schema", param="response_format"
        )
    if rf["type"] != "json_schema":
        return ResponseFormat(type=rf["type"], extra=accept_extra(rf, {"type"}))
    js = rf.get("json_schema")
    if not isinstance(js, dict) or not isinstance(js.get("name"), str):
        raise ProtocolError(
            "json_schema response_format needs json_schema.name", param="response_format.json_schema"
        )
    return ResponseFormat(
        type="json_schema",
        name=js["name"],
        description=js.get("description"),
        schema=js.get("schema"),
        strict=js.get("strict"),
        extra=accept_extra(js, {"name", "description", "schema", "strict"}),
    )
