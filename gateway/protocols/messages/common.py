"""Shared pieces of the Anthropic Messages codec: internal marker names, content block <-> node
mapping, usage normalisation and stop-reason mapping. The request, response and stream halves
all use these so they agree on every block shape."""

from __future__ import annotations

from typing import Any

from gateway.errors import ProtocolError
from gateway.urp import (
    AudioNode,
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
    Usage,
    accept_extra,
)

from ..base import (
    arguments_object,
    json_text,
    put_extra,
    scrub,
    split_data_url,
    token_count,
)

PROTOCOL = "messages"

# Internal markers (never emitted, never accepted from the wire).
SHAPE = (
    "_gw_messages_shape"  # "string" | "array" | "absent": content shape of a message / tool result / system
)
SOURCE_EXTRA = "_gw_messages_source_extra"  # unknown keys of an image/document `source` object
REASONING_KIND = "_gw_reasoning_kind"  # "redacted_thinking" for redacted thinking blocks
FILE_ID_ORIGIN = "_gw_file_id_origin"  # "messages" for Anthropic Files API ids
THINKING_FROM_MESSAGES = "_gw_summary_from_messages_thinking"  # on NodeDelta.extra of thinking_delta
STOP_REASON = "_gw_messages_stop_reason"  # exact upstream stop_reason (Response/ResponseDone extra)
STOP_SEQUENCE = "_gw_messages_stop_sequence"
START_USAGE = "_gw_messages_start_usage"  # ResponseStart.extra: Usage from message_start
TOOL_TYPE = "_gw_messages_tool_type"  # ToolDef.extra: explicit `type: "custom"` on a client tool
RAW_TOOL_CHOICE = "_gw_messages_tool_choice"  # Request.extra: the exact wire tool_choice
RAW_THINKING = "_gw_messages_thinking"  # ReasoningConfig.extra: the exact `thinking` object
RAW_OUTPUT_CONFIG = "_gw_messages_output_config"  # Request.extra: the exact `output_config` object
DERIVED_EFFORT = "_gw_messages_derived_effort"  # ReasoningConfig.extra: effort derived at decode
FOREIGN_SIGNATURE = "_gw_messages_foreign_signature"  # thinking whose signature carried the mz1. sigil
IS_ERROR_FALSE = "_gw_messages_is_error_false"  # ToolResultNode.extra: the client wrote is_error: false

SIGIL = "mz1."

_FINISH_IN = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
}


def unknown(raw: dict[str, Any], known: frozenset[str]) -> dict[str, Any]:
    """``accept_extra`` with a fast path: no dict is built when every key is known (the common case)."""
    return {} if raw.keys() <= known else accept_extra(raw, known)


# A block's location for error messages (``param``), formatted only when an error is raised: a
# string, or a ``(format, *args)`` tuple whose args may be such tuples. Formatting two f-strings
# per block up front cost ~0.1 ms of the ~0.7 ms a 1 MB agent history takes to decode
# (bench/AGENT_REQUESTS.md).
Where = str | tuple[Any, ...]


def where(path: Where) -> str:
    """``path`` as the dotted location string errors name."""
    if isinstance(path, str):
        return path
    fmt, *args = path
    return fmt.format(*(where(a) if isinstance(a, tuple) else a for a in args))


# -- reasoning signature sigil ---------------------------------------------------------------


def split_signature(sig: Any) -> tuple[str | None, Any]:
    """``mz1.<id>.<signature>`` -> (id, signature): lets a Responses reasoning id survive a round
    trip through a Claude-style client. Anything else is returned unchanged with no id."""
    if isinstance(sig, str) and sig.startswith(SIGIL):
        rid, sep, rest = sig[len(SIGIL) :].partition(".")
        if sep and rid:
            return rid, rest
    return None, sig


def client_signature(node: ReasoningNode) -> str | None:
    """The signature shown to a Messages client: wrapped with the reasoning id when there is one."""
    enc = node.encrypted
    if not isinstance(enc, str) or not enc:
        return None
    if node.id and not enc.startswith(SIGIL):
        return f"{SIGIL}{node.id}.{enc}"
    return enc


# -- blocks -> nodes ---------------------------------------------------------------------------

_TEXT_KEYS = frozenset({"type", "text", "phase"})
_MEDIA_KEYS = frozenset({"type", "source"})
_THINKING_KEYS = frozenset({"type", "thinking", "signature"})
_REDACTED_KEYS = frozenset({"type", "data"})
_TOOL_USE_KEYS = frozenset({"type", "id", "name", "input"})
_TOOL_RESULT_KEYS = frozenset({"type", "tool_use_id", "content", "is_error"})


def _source(raw: Any, path: Where, *, document: bool) -> tuple[MediaSource, dict[str, Any]] | None:
    """A wire ``source`` object -> (MediaSource, node-extra additions); None when the source
    type is unknown (the block then becomes a ProviderItemNode)."""
    if not isinstance(raw, dict):
        raise ProtocolError("source must be an object", param=f"{where(path)}.source")
    kind = raw.get("type")
    add: dict[str, Any] = {}
    if kind == "base64":
        data, mt = raw.get("data"), raw.get("media_type")
        if not isinstance(data, str):
            raise ProtocolError("source.data must be a string", param=f"{where(path)}.source.data")
        src = MediaSource(kind="base64", data=data, media_type=mt if isinstance(mt, str) else None)
        known = ("type", "data", "media_type")
    elif kind == "url":
        url = raw.get("url")
        if not isinstance(url, str):
            raise ProtocolError("source.url must be a string", param=f"{where(path)}.source.url")
        src = MediaSource(kind="url", url=url)
        known = ("type", "url")
    elif kind == "file":
        fid = raw.get("file_id")
        if not isinstance(fid, str):
            raise ProtocolError("source.file_id must be a string", param=f"{where(path)}.source.file_id")
        src = MediaSource(kind="file_id", file_id=fid)
        add[FILE_ID_ORIGIN] = PROTOCOL
        known = ("type", "file_id")
    elif document and kind == "text":
        data = raw.get("data")
        if not isinstance(data, str):
            raise ProtocolError("source.data must be a string", param=f"{where(path)}.source.data")
        mt = raw.get("media_type")
        src = MediaSource(kind="text", text=data, media_type=mt if isinstance(mt, str) else None)
        known = ("type", "data", "media_type")
    elif document and kind == "content":
        content = raw.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
            add[SHAPE] = "string"
        if not isinstance(content, list):
            raise ProtocolError(
                "source.content must be a string or a list", param=f"{where(path)}.source.content"
            )
        src = MediaSource(kind="content", content=scrub(content))
        known = ("type", "content")
    else:
        return None
    rest = accept_extra(raw, known)
    if rest:
        add[SOURCE_EXTRA] = rest
    return src, add


def decode_block(block: Any, role: str, path: Where, *, in_tool_result: bool = False) -> Node:
    """One Anthropic content block -> one node. Unknown block types become ProviderItemNodes."""
    if not isinstance(block, dict):
        raise ProtocolError("content block must be an object", param=where(path))
    btype = block.get("type")
    if btype == "text":  # the commonest block first (a JSON value equal to "text" is that string)
        text = block.get("text")
        if not isinstance(text, str):
            raise ProtocolError("text block needs a string `text`", param=f"{where(path)}.text")
        phase = block.get("phase")
        return TextNode(
            role=role,
            content=text,
            phase=phase if phase is None or isinstance(phase, str) else None,
            extra={} if block.keys() <= _TEXT_KEYS else accept_extra(block, _TEXT_KEYS),
        )
    if not isinstance(btype, str):
        raise ProtocolError("content block needs a string `type`", param=f"{where(path)}.type")
    if btype in ("image", "document"):
        got = _source(block.get("source"), path, document=btype == "document")
        if got is not None:
            src, add = got
            extra = unknown(block, _MEDIA_KEYS)
            extra.update(add)
            cls = ImageNode if btype == "image" else FileNode
            return cls(role=role, source=src, extra=extra)
    elif not in_tool_result:
        if btype == "thinking":
            thinking = block.get("thinking")
            if not isinstance(thinking, str):
                raise ProtocolError(
                    "thinking block needs a string `thinking`", param=f"{where(path)}.thinking"
                )
            rid, sig = split_signature(block.get("signature"))
            extra = {} if block.keys() <= _THINKING_KEYS else accept_extra(block, _THINKING_KEYS)
            if rid is not None:
                extra[FOREIGN_SIGNATURE] = True
            return ReasoningNode(id=rid, summary=thinking, encrypted=sig, extra=extra)
        if btype == "redacted_thinking":
            data = block.get("data")
            if not isinstance(data, str):
                raise ProtocolError(
                    "redacted_thinking block needs a string `data`", param=f"{where(path)}.data"
                )
            extra = unknown(block, _REDACTED_KEYS)
            extra[REASONING_KIND] = "redacted_thinking"
            return ReasoningNode(encrypted=data, extra=extra)
        if btype == "tool_use":
            return decode_tool_use(block, path)
        if btype == "tool_result":
            return decode_tool_result(block, path)
    return ProviderItemNode(origin_protocol=PROTOCOL, item_type=btype, body=scrub(block), role=role)


def decode_tool_use(block: dict[str, Any], path: Where) -> ToolCallNode:
    cid, name, inp = block.get("id"), block.get("name"), block.get("input")
    if not isinstance(cid, str) or not cid:
        raise ProtocolError("tool_use block needs a string `id`", param=f"{where(path)}.id")
    if not isinstance(name, str):
        raise ProtocolError("tool_use block needs a string `name`", param=f"{where(path)}.name")
    if inp is None:
        inp = {}
    if not isinstance(inp, dict):
        raise ProtocolError("tool_use input must be an object", param=f"{where(path)}.input")
    return ToolCallNode(
        call_id=cid,
        name=name,
        arguments=json_text(inp),
        extra={} if block.keys() <= _TOOL_USE_KEYS else accept_extra(block, _TOOL_USE_KEYS),
    )


def decode_tool_result(block: dict[str, Any], path: Where) -> ToolResultNode:
    cid = block.get("tool_use_id")
    if not isinstance(cid, str) or not cid:
        raise ProtocolError(
            "tool_result block needs a string `tool_use_id`", param=f"{where(path)}.tool_use_id"
        )
    is_error = block.get("is_error")
    if is_error is not None and not isinstance(is_error, bool):
        raise ProtocolError("is_error must be a boolean", param=f"{where(path)}.is_error")
    extra = {} if block.keys() <= _TOOL_RESULT_KEYS else accept_extra(block, _TOOL_RESULT_KEYS)
    if is_error is False:
        extra[IS_ERROR_FALSE] = True  # explicit false survives a same-protocol hop
    raw = block.get("content")
    content: list[Node]
    if isinstance(raw, str):  # the commonest shape first
        extra[SHAPE] = "string"
        content = [TextNode(role="tool", content=raw)]
    elif raw is None:
        extra[SHAPE] = "absent" if "content" not in block else "null"
        content = []
    elif isinstance(raw, list):
        content = []
        for i, sub in enumerate(raw):
            content.append(decode_block(sub, "tool", ("{}.content[{}]", path, i), in_tool_result=True))
    else:
        raise ProtocolError("tool_result content must be a string or a list", param=f"{where(path)}.content")
    return ToolResultNode(call_id=cid, content=content, is_error=bool(is_error), extra=extra)


# -- nodes -> blocks ---------------------------------------------------------------------------


def encode_source(src: MediaSource, extra: dict[str, Any], *, document: bool) -> dict[str, Any] | None:
    """MediaSource -> Anthropic source object; None when Anthropic cannot express it (the node is
    then skipped, never turned into text)."""
    kind = src.kind
    if kind == "base64" and src.data is not None:
        out: dict[str, Any] = {
            "type": "base64",
            "media_type": src.media_type or ("application/pdf" if document else "image/png"),
            "data": src.data,
        }
    elif kind == "url" and src.url:
        parts = split_data_url(src.url)
        if parts is not None:
            out = {"type": "base64", "media_type": parts[0], "data": parts[1]}
        else:
            out = {"type": "url", "url": src.url}
    elif kind == "file_id" and src.file_id and extra.get(FILE_ID_ORIGIN) == PROTOCOL:
        out = {"type": "file", "file_id": src.file_id}
    elif document and kind == "text" and src.text is not None:
        out = {"type": "text", "media_type": src.media_type or "text/plain", "data": src.text}
    elif document and kind == "content" and src.content is not None:
        content: Any = src.content
        if (
            extra.get(SHAPE) == "string"
            and len(content) == 1
            and isinstance(content[0], dict)
            and set(content[0]) == {"type", "text"}
        ):
            content = content[0]["text"]
        out = {"type": "content", "content": scrub(content)}
    else:
        return None
    sx = extra.get(SOURCE_EXTRA)
    if isinstance(sx, dict):
        put_extra(out, sx)
    return out


def _media_block(node: ImageNode | FileNode, extras: bool) -> dict[str, Any] | None:
    document = isinstance(node, FileNode)
    src = encode_source(node.source, node.extra, document=document)
    if src is None:
        return None
    block = {"type": "document" if document else "image", "source": src}
    return put_extra(block, node.extra) if extras else block


def reasoning_block(node: ReasoningNode, *, extras: bool, signature: str | None) -> dict[str, Any] | None:
    """Reasoning -> thinking / redacted_thinking block by the reference's ordered rule."""
    if node.extra.get(REASONING_KIND) == "redacted_thinking":
        if not isinstance(node.encrypted, str) or not node.encrypted:
            return None
        block: dict[str, Any] = {"type": "redacted_thinking", "data": node.encrypted}
    else:
        text = node.content if node.content else (node.summary or "")
        if not text and not signature:
            return None
        block = {"type": "thinking", "thinking": text}
        if signature is not None:
            block["signature"] = signature
    return put_extra(block, node.extra) if extras else block


def encode_content_block(
    node: Node, *, extras: bool, same_family: bool, signature_for_client: bool = False
) -> dict[str, Any] | None:
    """One node -> one Anthropic content block (None: not expressible, skipped).

    ``extras``: merge node extras (same-family or when nested stripping is off).
    ``signature_for_client``: wrap reasoning signatures with the ``mz1.`` sigil (downstream only).
    A refusal becomes a text block: it is what the assistant said, and dropping it would change the
    conversation; custom (freeform) tool calls are omitted because Anthropic has no such tool."""
    if isinstance(node, TextNode):
        if not node.content:
            return None
        block: dict[str, Any] = {"type": "text", "text": node.content}
        if node.phase is not None and same_family:
            block["phase"] = node.phase
        return put_extra(block, node.extra) if extras else block
    if isinstance(node, ToolCallNode):
        if node.tool_type != "function":
            return None
        block = {
            "type": "tool_use",
            "id": node.call_id,
            "name": node.name,
            "input": arguments_object(node.arguments),
        }
        return put_extra(block, node.extra) if extras else block
    if isinstance(node, ReasoningNode):
        if signature_for_client:
            sig = client_signature(node) or ""  # SDK thinking blocks always carry a signature
        else:
            if node.extra.get(FOREIGN_SIGNATURE):
                return None  # another provider's reasoning (Responses id sigil): not an Anthropic signature
            sig = node.encrypted if isinstance(node.encrypted, str) and node.encrypted else None
            if sig is None and not same_family:
                return None  # Anthropic rejects unsigned thinking in history
        return reasoning_block(node, extras=extras, signature=sig)
    if isinstance(node, ImageNode | FileNode):
        return _media_block(node, extras)
    if isinstance(node, RefusalNode):
        return {"type": "text", "text": node.content} if node.content else None
    if isinstance(node, ProviderItemNode):
        if node.origin_protocol == PROTOCOL:
            return scrub(node.body)
        return None
    if isinstance(node, AudioNode):
        return None
    return None


def encode_tool_result(node: ToolResultNode, *, extras: bool, same_family: bool) -> dict[str, Any] | None:
    """A tool result block. One extra-free text becomes a plain string; a result without content
    omits ``content`` (the reference sends an empty text block, which Anthropic rejects as an
    empty text block)."""
    if node.tool_type != "function":
        return None
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": node.call_id}
    shape = node.extra.get(SHAPE)
    parts: list[dict[str, Any]] = []
    for sub in node.content:
        if isinstance(sub, TextNode):
            if sub.content or shape == "string":
                parts.append(
                    put_extra({"type": "text", "text": sub.content}, sub.extra)
                    if extras
                    else {"type": "text", "text": sub.content}
                )
        else:
            b = encode_content_block(sub, extras=extras, same_family=same_family)
            if b is not None:
                parts.append(b)
    if parts:
        if (
            len(parts) == 1
            and parts[0].get("type") == "text"
            and len(parts[0]) == 2
            and shape != "array"
            and (shape == "string" or not same_family)
        ):
            block["content"] = parts[0]["text"]
        else:
            block["content"] = parts
    elif shape == "null":
        block["content"] = None
    elif shape == "string":
        block["content"] = ""
    if node.is_error:
        block["is_error"] = True
    elif node.extra.get(IS_ERROR_FALSE):
        block["is_error"] = False
    return put_extra(block, node.extra) if extras else block


# -- usage -------------------------------------------------------------------------------------

_USAGE_KNOWN = frozenset(
    {"input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"}
)


def decode_usage(raw: Any) -> Usage | None:
    """Anthropic usage -> Usage. Anthropic's ``input_tokens`` excludes cache reads and writes;
    ours includes them, so both cache counters are added back here."""
    if not isinstance(raw, dict):
        return None
    cr = token_count(raw.get("cache_read_input_tokens"))
    cc = token_count(raw.get("cache_creation_input_tokens"))
    usage = Usage(
        input_tokens=(token_count(raw.get("input_tokens")) or 0) + (cr or 0) + (cc or 0),
        output_tokens=token_count(raw.get("output_tokens")) or 0,
        cache_read_tokens=cr,
        cache_creation_tokens=cc,
    )
    details = raw.get("output_tokens_details")
    if isinstance(details, dict):
        usage.reasoning_tokens = token_count(details.get("thinking_tokens"))
    usage.extra = unknown(raw, _USAGE_KNOWN)
    return usage


def encode_usage(usage: Usage | None, *, same_family: bool) -> dict[str, Any]:
    """Usage -> Anthropic usage: cache reads and writes subtracted back out of ``input_tokens``."""
    if usage is None:
        return {"input_tokens": 0, "output_tokens": 0}
    cr = usage.cache_read_tokens or 0
    cc = usage.cache_creation_tokens or 0
    body: dict[str, Any] = {
        "input_tokens": max(0, usage.input_tokens - cr - cc),
        "output_tokens": usage.output_tokens,
    }
    # Same-family: exactly the counters the upstream reported. Otherwise both, as Anthropic does.
    if usage.cache_creation_tokens is not None or not same_family:
        body["cache_creation_input_tokens"] = cc
    if usage.cache_read_tokens is not None or not same_family:
        body["cache_read_input_tokens"] = cr
    if same_family and usage.extra:
        put_extra(body, usage.extra)
    return body


# -- stop reasons ------------------------------------------------------------------------------


def finish_from_wire(reason: Any) -> str | None:
    if not isinstance(reason, str) or not reason:
        return None
    return _FINISH_IN.get(reason, "other")


def stop_to_wire(finish: str | None, extra: dict[str, Any], *, has_tool_use: bool) -> tuple[str, Any]:
    """(stop_reason, stop_sequence) for a Messages client. The exact upstream Anthropic reason is
    replayed when it still agrees with the (possibly transformed) finish reason."""
    native = extra.get(STOP_REASON)
    if isinstance(native, str) and native and finish_from_wire(native) == (finish or "stop"):
        return native, extra.get(STOP_SEQUENCE)
    if has_tool_use:
        return "tool_use", None
    if finish == "length":
        return "max_tokens", None
    if finish == "content_filter":
        return "refusal", None
    if isinstance(native, str) and native and finish == "other":
        return native, extra.get(STOP_SEQUENCE)
    return "end_turn", None


# -- errors ------------------------------------------------------------------------------------

_STATUS_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    502: "api_error",
    503: "overloaded_error",
    504: "timeout_error",
    529: "overloaded_error",
}
# Anthropic's own ``error.type`` values: the SDKs and Claude Code branch on these, so nothing
# else (our codes such as ``invalid_request``, OpenAI's ``server_error``) goes in that field.
ANTHROPIC_ERROR_TYPES = frozenset(
    {
        "invalid_request_error",
        "authentication_error",
        "billing_error",
        "permission_error",
        "not_found_error",
        "request_too_large",
        "rate_limit_error",
        "api_error",
        "timeout_error",
        "overloaded_error",
    }
)


def error_type_for(status: int, code: str | None, error_type: str | None = None) -> str:
    """The Anthropic ``error.type``: the given type when it is one of Anthropic's, else the type
    Anthropic uses for that HTTP status. Our own code travels in a separate ``code`` field (see
    ``error_object``)."""
    if error_type in ANTHROPIC_ERROR_TYPES:
        return error_type
    if code in ANTHROPIC_ERROR_TYPES:
        return code
    found = _STATUS_TYPES.get(status)
    if found is not None:
        return found
    return "invalid_request_error" if 400 <= status < 500 else "api_error"


def error_object(
    status: int, code: str | None, message: str, error_type: str | None = None
) -> dict[str, Any]:
    """The inner Anthropic error object: ``{"type", "message", "code"?}``."""
    err: dict[str, Any] = {"type": error_type_for(status, code, error_type), "message": message}
    if code:
        err["code"] = code
    return err
