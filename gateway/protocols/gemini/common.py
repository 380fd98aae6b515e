"""Gemini shared fields: internal keys, finish reasons, usage, and the part -> node decoding the
whole-response and streaming decoders share."""

from __future__ import annotations

import re
from typing import Any

from gateway.errors import UpstreamProtocolError
from gateway.urp import (
    FileNode,
    ImageNode,
    MediaSource,
    Node,
    ProviderItemNode,
    ReasoningNode,
    TextNode,
    ToolCallNode,
    Usage,
    accept_extra,
)

from ..base import json_text, new_id, token_count

PROTOCOL = "gemini"
API_VERSION = "v1beta"

SIGNATURE = "_gw_gemini_thought_signature"  # node extra: the part's thoughtSignature, replayed verbatim
WIRE_CALL_ID = "_gw_gemini_call_id"  # ToolCallNode extra: the id came from Gemini (else synthesised)
NATIVE_FINISH = "_gw_gemini_finish_reason"
# ReasoningConfig.extra: a Gemini client's exact ``thinkingConfig`` and the effort derived from it,
# sent as it is to a Gemini upstream while the effort is unchanged (a budget survives the hop)
RAW_THINKING = "_gw_gemini_thinking"
# ToolResultNode.extra: a Gemini client's functionResponse ``response`` object and the text it
# became, sent as it is to a Gemini upstream while the text is unchanged
RAW_RESPONSE = "_gw_gemini_function_response"

_FINISH = {
    "STOP": "stop",
    "MAX_TOKENS": "length",
    "SAFETY": "content_filter",
    "RECITATION": "content_filter",
    "BLOCKLIST": "content_filter",
    "PROHIBITED_CONTENT": "content_filter",
    "SPII": "content_filter",
    "IMAGE_SAFETY": "content_filter",
}


def _int(value: Any) -> int:
    return token_count(value) or 0


def decode_usage(raw: Any) -> Usage | None:
    """usageMetadata -> Usage: input = prompt + tool-use prompt (cached tokens are already part
    of the prompt count), output = candidates + thoughts."""
    if not isinstance(raw, dict):
        return None
    thoughts = raw.get("thoughtsTokenCount")
    cached = raw.get("cachedContentTokenCount")
    known = (
        "promptTokenCount",
        "toolUsePromptTokenCount",
        "candidatesTokenCount",
        "thoughtsTokenCount",
        "cachedContentTokenCount",
        "totalTokenCount",
    )
    return Usage(
        input_tokens=_int(raw.get("promptTokenCount")) + _int(raw.get("toolUsePromptTokenCount")),
        output_tokens=_int(raw.get("candidatesTokenCount")) + _int(thoughts),
        cache_read_tokens=token_count(cached),
        reasoning_tokens=token_count(thoughts),
        extra=accept_extra(raw, known),
    )


def _finish(native: Any, output: list[Node]) -> str:
    if not isinstance(native, str) or not native:
        native = "STOP"
    finish = _FINISH.get(native, "other")
    if finish == "stop" and any(isinstance(n, ToolCallNode) for n in output):
        return "tool_calls"
    return finish


def _error(body: dict[str, Any]) -> UpstreamProtocolError:
    err = body.get("error") if isinstance(body.get("error"), dict) else {}
    status = err.get("code") if isinstance(err.get("code"), int) else None
    code = err.get("status") if isinstance(err.get("status"), str) else "upstream_error"
    return UpstreamProtocolError(
        str(err.get("message") or "upstream returned an error"),
        code=code.lower(),
        status=status,
        error_type=code,
    )


class _Calls:
    """Synthesises stable, unique tool-call ids for one response."""

    __slots__ = ("base", "n")

    def __init__(self, response_id: str | None) -> None:
        self.base = re.sub(r"[^A-Za-z0-9_-]", "", response_id or "") or new_id("", 8)
        self.n = 0

    def node(self, fc: dict[str, Any], part: dict[str, Any]) -> ToolCallNode:
        wire_id = fc.get("id")
        extra: dict[str, Any] = {}
        if isinstance(wire_id, str) and wire_id:
            call_id = wire_id
            extra[WIRE_CALL_ID] = True
        else:
            call_id = f"call_{self.base}_{self.n}"
        self.n += 1
        if part.get("thoughtSignature"):
            extra[SIGNATURE] = part["thoughtSignature"]
        args = fc.get("args")
        return ToolCallNode(
            call_id=call_id,
            name=str(fc.get("name") or ""),
            arguments=json_text(args if isinstance(args, dict) else {}),
            extra=extra,
        )


def _media_node(data: dict[str, Any]) -> Node:
    mime = data.get("mimeType") if isinstance(data.get("mimeType"), str) else "application/octet-stream"
    src = MediaSource(kind="base64", data=str(data.get("data") or ""), media_type=mime)
    if mime.startswith("image/"):
        return ImageNode(role="assistant", source=src)
    return FileNode(role="assistant", source=src)


def _parts_to_nodes(parts: list[Any], calls: _Calls) -> list[Node]:
    nodes: list[Node] = []
    for part in parts:
        if not isinstance(part, dict):
            continue
        sig = part.get("thoughtSignature")
        if "text" in part:
            text = part.get("text") if isinstance(part.get("text"), str) else ""
            last = nodes[-1] if nodes else None
            if part.get("thought"):
                if isinstance(last, ReasoningNode) and not last.extra.get(SIGNATURE):
                    last.summary = (last.summary or "") + text
                else:
                    last = ReasoningNode(summary=text)
                    nodes.append(last)
                if sig:
                    last.encrypted = sig
                    last.extra[SIGNATURE] = sig
                continue
            if isinstance(last, TextNode) and not last.extra.get(SIGNATURE):
                last.content += text
            else:
                last = TextNode(role="assistant", content=text)
                nodes.append(last)
            if sig:
                last.extra[SIGNATURE] = sig
        elif isinstance(part.get("functionCall"), dict):
            nodes.append(calls.node(part["functionCall"], part))
        elif isinstance(part.get("inlineData"), dict):
            nodes.append(_media_node(part["inlineData"]))
        else:
            kind = next((k for k in part if k != "thoughtSignature"), "unknown")
            nodes.append(ProviderItemNode(origin_protocol=PROTOCOL, item_type=kind, body=part))
    return nodes
