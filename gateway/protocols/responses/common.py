"""The Responses shared field module: the provenance markers and items -> URP nodes, shared by
the request codec (``input``/``instructions``), the response codec (``output``) and the streams;
the other direction (URP nodes -> items) is ``encode.py``.

Why one decoder: Responses request input items and response output items have the same shape
(message, function_call, custom_tool_call, reasoning, ...), so a single decoder and a single
encoder keep both directions consistent.

Lossless same-protocol replay is achieved with ``_gw_rsp_*`` provenance markers (never emitted):
the shape of a message item (string content, absent ``type``), a part type that differs from the
role's default, raw reasoning summary/content part lists, and the shape of a tool output.
"""

from __future__ import annotations

from typing import Any

import orjson

from gateway.errors import ProtocolError
from gateway.urp.nodes import (
    INTERNAL_PREFIX,
    ROLES,
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
)

from ..base import scrub, split_data_url

PROTOCOL = "responses"

# Internal markers (keys of node ``extra``; never emitted, never accepted from the wire).
M_ITEM = "_gw_rsp_item"  # first node of a message item: {"s": string content, "t": has type, "st": status}
M_PART = "_gw_rsp_part"  # original content part type when it differs from the role's default
M_IS_PART = "_gw_rsp_is_part"  # a ProviderItemNode that was a message content part, not an item
M_SUMMARY = "_gw_rsp_summary"  # raw reasoning ``summary`` list, replayed when the text is unchanged
M_CONTENT = "_gw_rsp_content"  # raw reasoning ``content`` list, same rule
M_OUTPUT = "_gw_rsp_output"  # tool output shape: "array" | "object" (string when absent)
M_INSTR = "_gw_rsp_instr"  # node derived from ``instructions``
M_BODY = "_gw_rsp_body"  # raw native item an ImageNode was decoded from (image_generation_call)
FILE_ID_ORIGIN = "_gw_file_id_origin"  # "openai" for Chat/Responses file ids
BREAKPOINT = "prompt_cache_breakpoint"  # OpenAI explicit prompt-cache breakpoint on a content entry
DOWNSTREAM_ONLY = "_gw_reasoning_downstream_only"  # reasoning shown to a client, never replayed upstream
# Reasoning summary parts are joined with a blank line in URP (each OpenAI part is a "**Title**\n\nbody"
# paragraph; joining them without a separator, as the reference does, runs titles into sentences).
SUMMARY_SEP = "\n\n"

TEXT_PART_TYPES = frozenset({"input_text", "output_text", "text"})
_MESSAGE_KEYS = frozenset({"type", "role", "content", "id", "phase", "status"})
_TEXT_PART_KEYS = frozenset({"type", "text"})
_REFUSAL_KEYS = frozenset({"type", "refusal"})
_IMAGE_KEYS = frozenset({"type", "image_url", "file_id", "detail"})
_FILE_KEYS = frozenset({"type", "file_id", "file_data", "file_url", "filename"})
_CALL_KEYS = frozenset({"type", "id", "call_id", "name", "arguments", "namespace"})
_CUSTOM_CALL_KEYS = frozenset({"type", "id", "call_id", "name", "input", "namespace"})
_OUTPUT_KEYS = frozenset({"type", "id", "call_id", "output"})
_REASONING_KEYS = frozenset({"type", "id", "summary", "content", "encrypted_content"})


def unknown_fields(raw: dict[str, Any], known: frozenset[str]) -> dict[str, Any]:
    """Unknown wire keys of ``raw``; a known key whose value is null also stays here so that
    "absent" and "null" remain distinct on replay."""
    out = {}
    for k, v in raw.items():
        if k.startswith(INTERNAL_PREFIX):
            continue
        if k not in known or (v is None and k != "type"):
            out[k] = v
    return out


def _opt_str(raw: dict[str, Any], key: str, path: str) -> str | None:
    v = raw.get(key)
    if v is None or isinstance(v, str):
        return v
    raise ProtocolError(f"'{key}' must be a string", param=f"{path}.{key}")


def _req_str(raw: dict[str, Any], key: str, path: str) -> str:
    v = raw.get(key)
    if isinstance(v, str):
        return v
    raise ProtocolError(f"'{key}' is required and must be a string", param=f"{path}.{key}")


# --------------------------------------------------------------------------------------------
# decode
# --------------------------------------------------------------------------------------------


def _split_data_url(value: str) -> tuple[str | None, str]:
    """``data:<mime>;base64,<b64>`` -> (mime or None, b64); anything else -> (None, value)."""
    split = split_data_url(value)
    if split is None:
        return None, value
    return split[0] or None, split[1]


def decode_part(part: Any, role: str, path: str) -> Node:
    """One message content part (or one tool-output content entry) -> a node."""
    if not isinstance(part, dict):
        raise ProtocolError("content part must be an object", param=path)
    ptype = part.get("type")
    if not isinstance(ptype, str):
        raise ProtocolError("content part 'type' must be a string", param=f"{path}.type")
    if ptype in TEXT_PART_TYPES:
        text = part.get("text")
        if not isinstance(text, str):
            raise ProtocolError("'text' must be a string", param=f"{path}.text")
        extra = unknown_fields(part, _TEXT_PART_KEYS)
        if ptype != ("output_text" if role == "assistant" else "input_text"):
            extra[M_PART] = ptype
        return TextNode(role=role, content=text, extra=extra)
    if ptype == "refusal":
        return RefusalNode(content=_req_str(part, "refusal", path), extra=unknown_fields(part, _REFUSAL_KEYS))
    if ptype == "input_image":
        url = _opt_str(part, "image_url", path)
        file_id = _opt_str(part, "file_id", path)
        detail = _opt_str(part, "detail", path)
        extra = unknown_fields(part, _IMAGE_KEYS)
        if url is not None:
            src = MediaSource(kind="url", url=url, detail=detail)
        elif file_id is not None:
            src = MediaSource(kind="file_id", file_id=file_id, detail=detail)
            extra[FILE_ID_ORIGIN] = "openai"
        else:
            raise ProtocolError("input_image needs 'image_url' or 'file_id'", param=path)
        return ImageNode(role=role, source=src, extra=extra)
    if ptype == "input_file":
        extra = unknown_fields(part, _FILE_KEYS)
        filename = _opt_str(part, "filename", path)
        file_id = _opt_str(part, "file_id", path)
        file_data = _opt_str(part, "file_data", path)
        file_url = _opt_str(part, "file_url", path)
        if file_id is not None:
            src = MediaSource(kind="file_id", file_id=file_id, filename=filename)
            extra[FILE_ID_ORIGIN] = "openai"
        elif file_data is not None:
            mime, data = _split_data_url(file_data)
            src = MediaSource(kind="base64", data=data, media_type=mime, filename=filename)
        elif file_url is not None:
            src = MediaSource(kind="url", url=file_url, filename=filename)
        else:
            raise ProtocolError("input_file needs 'file_id', 'file_data' or 'file_url'", param=path)
        return FileNode(role=role, source=src, extra=extra)
    body = {k: v for k, v in part.items() if not k.startswith(INTERNAL_PREFIX)}
    return ProviderItemNode(
        origin_protocol=PROTOCOL, item_type=ptype, body=body, role=role, extra={M_IS_PART: True}
    )


def _decode_message(item: dict[str, Any], path: str, default_role: str, out: list[Node]) -> None:
    role = item.get("role", default_role)
    if not isinstance(role, str) or role not in ROLES:
        raise ProtocolError(f"unknown role {role!r}", param=f"{path}.role")
    item_id = _opt_str(item, "id", path)
    phase = _opt_str(item, "phase", path)
    env = unknown_fields(item, _MESSAGE_KEYS)
    if env:
        out.append(EnvelopeExtraNode(extra=env))
    content = item.get("content")
    flags = {"s": isinstance(content, str), "t": "type" in item}
    if isinstance(item.get("status"), str):
        flags["st"] = item["status"]  # an item status is not envelope data: keep it with the item
    if isinstance(content, str):
        nodes: list[Node] = [TextNode(role=role, content=content)]
    elif isinstance(content, list):
        nodes = [decode_part(p, role, f"{path}.content[{i}]") for i, p in enumerate(content)]
    else:
        raise ProtocolError("'content' must be a string or an array", param=f"{path}.content")
    if not nodes:
        # An empty message still exists on the wire; keep it as an empty text node so it replays.
        nodes = [TextNode(role=role, content="", extra={M_PART: "_empty"})]
    for n in nodes:
        n.id = item_id
        if isinstance(n, TextNode):
            n.phase = phase
    nodes[0].extra[M_ITEM] = flags
    out.extend(nodes)


def _arguments(item: dict[str, Any], key: str, path: str) -> str:
    v = item.get(key, "")
    if isinstance(v, str):
        return v
    if isinstance(v, dict | list):
        return orjson.dumps(v).decode()
    raise ProtocolError(f"'{key}' must be a string", param=f"{path}.{key}")


def _decode_output(item: dict[str, Any], path: str, tool_type: str) -> ToolResultNode:
    output = item.get("output")
    extra = unknown_fields(item, _OUTPUT_KEYS)
    if isinstance(output, str):
        content: list[Node] = [TextNode(role="tool", content=output)]
    elif isinstance(output, list):
        content = [decode_part(p, "user", f"{path}.output[{i}]") for i, p in enumerate(output)]
        extra[M_OUTPUT] = "array"
    elif isinstance(output, dict):
        content = [decode_part(output, "user", f"{path}.output")]
        extra[M_OUTPUT] = "object"
    else:
        raise ProtocolError("'output' must be a string or an array", param=f"{path}.output")
    return ToolResultNode(
        id=_opt_str(item, "id", path),
        call_id=_req_str(item, "call_id", path),
        content=content,
        tool_type=tool_type,
        extra=extra,
    )


def _joined(parts: Any, kind: str, path: str, sep: str = "") -> str | None:
    if parts is None:
        return None
    if not isinstance(parts, list):
        raise ProtocolError(f"'{kind}' must be an array", param=f"{path}.{kind}")
    texts = []
    for i, p in enumerate(parts):
        if not isinstance(p, dict) or not isinstance(p.get("text"), str):
            raise ProtocolError(f"'{kind}' entries need a string 'text'", param=f"{path}.{kind}[{i}].text")
        texts.append(p["text"])
    return sep.join(texts)


def _decode_reasoning(item: dict[str, Any], path: str) -> ReasoningNode:
    extra = unknown_fields(item, _REASONING_KEYS)
    summary = item.get("summary")
    content = item.get("content")
    node = ReasoningNode(
        id=_opt_str(item, "id", path),
        extra=extra,
        summary=_joined(summary, "summary", path, SUMMARY_SEP) or None,
        content=_joined(content, "content", path),
    )
    if summary is not None:
        extra[M_SUMMARY] = scrub(summary)
    if content is not None:
        extra[M_CONTENT] = scrub(content)
    enc = item.get("encrypted_content")
    if enc is not None:
        node.encrypted = enc
    return node


def decode_item(item: Any, path: str, default_role: str, out: list[Node]) -> None:
    """Append the nodes of one Responses item to ``out``."""
    if not isinstance(item, dict):
        raise ProtocolError("item must be an object", param=path)
    itype = item.get("type")
    if itype is None or itype == "message":
        _decode_message(item, path, default_role, out)
    elif itype == "function_call" or itype == "custom_tool_call":
        custom = itype == "custom_tool_call"
        out.append(
            ToolCallNode(
                id=_opt_str(item, "id", path),
                call_id=_req_str(item, "call_id", path),
                name=_req_str(item, "name", path),
                arguments=_arguments(item, "input" if custom else "arguments", path),
                tool_type="custom" if custom else "function",
                namespace=_opt_str(item, "namespace", path),
                extra=unknown_fields(item, _CUSTOM_CALL_KEYS if custom else _CALL_KEYS),
            )
        )
    elif itype == "function_call_output":
        out.append(_decode_output(item, path, "function"))
    elif itype == "custom_tool_call_output":
        out.append(_decode_output(item, path, "custom"))
    elif itype == "reasoning":
        out.append(_decode_reasoning(item, path))
    elif isinstance(itype, str):
        role = item.get("role") if isinstance(item.get("role"), str) else "assistant"
        out.append(
            ProviderItemNode(
                origin_protocol=PROTOCOL,
                item_type=itype,
                body=scrub(item),
                role=role,
                id=item.get("id") if isinstance(item.get("id"), str) else None,
            )
        )
    else:
        raise ProtocolError("item 'type' must be a string", param=f"{path}.type")


def decode_items(items: list[Any], path: str, default_role: str) -> list[Node]:
    out: list[Node] = []
    for i, item in enumerate(items):
        decode_item(item, f"{path}[{i}]", default_role, out)
    return out
