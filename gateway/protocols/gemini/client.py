"""Gemini as a *client* protocol (issue 19, beyond the reference): the client half of the codec
for ``POST /v1beta/models/{model}:generateContent`` / ``:streamGenerateContent?alt=sse``.

The proxy puts the path's model and the stream flag into the body (``model``, ``stream``) before
decoding, since Gemini carries them in the URL. Decoding follows the upstream encoder in reverse:

- ``systemInstruction`` -> one system text node; ``contents[]`` (roles ``user``/``model``):
  ``text``, ``inlineData``/``fileData``, ``functionCall`` (its ``id`` kept, else one is
  synthesised), ``functionResponse`` (matched to its call by ``id``, else by name in order),
  thought parts (``thought: true``) as reasoning, ``thoughtSignature`` kept for the replay;
- ``generationConfig``: temperature, topP, maxOutputTokens, stopSequences, thinkingConfig
  (budget or level -> effort);
- ``tools[].functionDeclarations[]`` with ``parameters`` (OpenAPI-style upper-case types are
  lower-cased) or ``parametersJsonSchema``; ``toolConfig.functionCallingConfig`` -> tool choice.

Responses are ``GenerateContentResponse`` objects; streams are one such object per SSE ``data:``
frame (text and thought deltas as they come, a function call whole when it completes, the
finish reason and usage in the last frame).
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any

import orjson

from gateway.errors import ProtocolError
from gateway.urp import (
    FileNode,
    ImageNode,
    MediaSource,
    Node,
    ReasoningConfig,
    ReasoningNode,
    Request,
    Response,
    TextNode,
    ToolCallNode,
    ToolDef,
    ToolResultNode,
    Usage,
)
from gateway.urp import events as ev

from ..base import EncodeContext, arguments_object, new_id
from .common import PROTOCOL, RAW_RESPONSE, RAW_THINKING, SIGNATURE, WIRE_CALL_ID

_STATUS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    409: "ABORTED",
    413: "INVALID_ARGUMENT",
    422: "INVALID_ARGUMENT",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    502: "UNAVAILABLE",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}
_FINISH_OUT = {"stop": "STOP", "tool_calls": "STOP", "length": "MAX_TOKENS", "content_filter": "SAFETY"}
_LEVELS = {"minimal": "minimal", "low": "low", "medium": "medium", "high": "high"}


def error_body(
    status: int, code: str, message: str, *, param: str | None = None, error_type: str | None = None
) -> dict:
    """Google's error envelope; our code goes in ``details`` beside Google's status name."""
    return {
        "error": {
            "code": status,
            "message": message,
            "status": _STATUS.get(status, "UNKNOWN"),
            "details": [
                {
                    "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                    "reason": code,
                    "domain": "gateway",
                    **({"metadata": {"param": param}} if param else {}),
                }
            ],
        }
    }


# -- request -----------------------------------------------------------------------------------


def _schema(value: Any) -> Any:
    """OpenAPI-style schema (``"type": "OBJECT"``) -> JSON Schema spelling."""
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if k == "type" and isinstance(v, str):
                out[k] = v.lower()
            else:
                out[k] = _schema(v)
        return out
    if isinstance(value, list):
        return [_schema(v) for v in value]
    return value


def _text_of(parts: Any, where: str) -> str:
    if not isinstance(parts, list):
        raise ProtocolError("parts must be a list", param=where)
    return "".join(p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str))


def _str(value: Any, default: str) -> str:
    return value if isinstance(value, str) else default


def _media(part: dict[str, Any], role: str) -> Node | None:
    inline = part.get("inlineData")
    if isinstance(inline, dict):
        mime = _str(inline.get("mimeType"), "application/octet-stream")
        src = MediaSource(kind="base64", data=str(inline.get("data") or ""), media_type=mime)
    else:
        fdata = part.get("fileData")
        if not isinstance(fdata, dict) or not isinstance(fdata.get("fileUri"), str):
            return None
        mime = _str(fdata.get("mimeType"), "application/octet-stream")
        src = MediaSource(kind="url", url=fdata["fileUri"], media_type=mime)
    return ImageNode(role=role, source=src) if mime.startswith("image/") else FileNode(role=role, source=src)


_B64URL = re.compile(r"^[A-Za-z0-9_-]+={0,2}$")
_WRAPPED = b"\x00mz-sig\x00"  # marks a signature we wrapped (``_wire_signature``)


def _client_signature(value: Any) -> str | None:
    """A ``thoughtSignature`` as the client sent it back. Google's SDKs hold signatures as bytes
    and re-encode them as URL-safe base64; the upstream issued standard base64, so the URL-safe
    alphabet is mapped back and the upstream gets its own signature unchanged. One we wrapped
    is unwrapped to the upstream's original text."""
    if not isinstance(value, str) or not value:
        return None
    if ("-" in value or "_" in value) and _B64URL.match(value):
        value = value.replace("-", "+").replace("_", "/")
    if value.startswith("AG16LXNpZw"):  # base64 of _WRAPPED's first bytes: cheap pre-check
        try:
            raw = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            return value
        if raw.startswith(_WRAPPED):
            return raw[len(_WRAPPED) :].decode("utf-8", "replace")
    return value


def _wire_signature(sig: str) -> str:
    """The signature as a ``thoughtSignature``: Google's SDKs read it as base64 bytes and refuse the
    whole answer when it is not (found by the codec matrix: google-genai raised on a Chat
    upstream's opaque reasoning signature). Another protocol's signature that is not base64 is
    sent as the base64 of a marker plus its text, and ``_client_signature`` undoes it on the
    replay; a base64 one (Gemini's own, OpenAI's encrypted content) goes as it is."""
    try:
        base64.b64decode(sig, validate=True)
        return sig
    except (binascii.Error, ValueError):
        return base64.b64encode(_WRAPPED + sig.encode()).decode("ascii")


class _Pending:
    """Calls the model made, so function responses without an id find theirs (by name, in order)."""

    def __init__(self) -> None:
        self.by_name: dict[str, list[str]] = {}
        self.n = 0

    def call(self, fc: dict[str, Any], part: dict[str, Any]) -> ToolCallNode:
        name = fc.get("name")
        if not isinstance(name, str) or not name:
            raise ProtocolError("functionCall needs a name", param="contents")
        wire_id = fc.get("id") if isinstance(fc.get("id"), str) and fc.get("id") else None
        call_id = wire_id or f"call_gemini_{self.n}"
        self.n += 1
        self.by_name.setdefault(name, []).append(call_id)
        extra: dict[str, Any] = {WIRE_CALL_ID: True} if wire_id else {}
        sig = _client_signature(part.get("thoughtSignature"))
        if sig:
            extra[SIGNATURE] = sig
        args = fc.get("args") if isinstance(fc.get("args"), dict) else {}
        return ToolCallNode(call_id=call_id, name=name, arguments=orjson.dumps(args).decode(), extra=extra)

    def result(self, fr: dict[str, Any]) -> ToolResultNode:
        name = _str(fr.get("name"), "")
        call_id = fr.get("id") if isinstance(fr.get("id"), str) and fr.get("id") else None
        waiting = self.by_name.get(name) or []
        if call_id is None:
            call_id = waiting.pop(0) if waiting else f"call_gemini_{name}"
        elif call_id in waiting:
            waiting.remove(call_id)
        raw = response = fr.get("response")
        if (
            isinstance(response, dict)
            and len(response) == 1
            and isinstance(next(iter(response.values())), str)
            and next(iter(response)) in ("result", "output", "content")
        ):
            response = next(
                iter(response.values())
            )  # {"result": text}: the text (what our upstream side writes)
        text = (
            response
            if isinstance(response, str)
            else orjson.dumps(response if response is not None else {}).decode()
        )
        return ToolResultNode(
            call_id=call_id,
            content=[TextNode(content=text)],
            extra={RAW_RESPONSE: {"text": text, "response": raw}} if isinstance(raw, dict) else {},
        )


def _content_nodes(content: Any, index: int, pending: _Pending) -> list[Node]:
    where = f"contents[{index}]"
    if not isinstance(content, dict):
        raise ProtocolError("each content must be an object", param=where)
    role = content.get("role") or "user"
    if role not in ("user", "model", "function", "tool"):
        raise ProtocolError("role must be 'user' or 'model'", param=f"{where}.role")
    parts = content.get("parts")
    if not isinstance(parts, list):
        raise ProtocolError("parts must be a list", param=f"{where}.parts")
    urp_role = "assistant" if role == "model" else "user"
    nodes: list[Node] = []
    for part in parts:
        if not isinstance(part, dict):
            raise ProtocolError("each part must be an object", param=f"{where}.parts")
        sig = _client_signature(part.get("thoughtSignature"))
        if isinstance(part.get("functionCall"), dict):
            nodes.append(pending.call(part["functionCall"], part))
        elif isinstance(part.get("functionResponse"), dict):
            nodes.append(pending.result(part["functionResponse"]))
        elif isinstance(part.get("text"), str):
            node: Node
            if part.get("thought"):
                node = ReasoningNode(content=part["text"], encrypted=sig)
            else:
                node = TextNode(role=urp_role, content=part["text"])
            if sig:
                node.extra[SIGNATURE] = sig
            nodes.append(node)
        elif sig and not set(part) - {"thoughtSignature", "thought"}:
            nodes.append(ReasoningNode(encrypted=sig, extra={SIGNATURE: sig}))
        else:
            media = _media(part, urp_role)
            if media is not None:
                nodes.append(media)
    return nodes


def _tools(raw: Any) -> list[ToolDef] | None:
    if raw is None:
        return None
    if not isinstance(raw, list):
        raise ProtocolError("tools must be a list", param="tools")
    out: list[ToolDef] = []
    for group in raw:
        decls = None
        if isinstance(group, dict):  # the Python SDK may send snake_case keys
            decls = group.get("functionDeclarations", group.get("function_declarations"))
        for decl in decls if isinstance(decls, list) else ():
            if not isinstance(decl, dict) or not isinstance(decl.get("name"), str) or not decl["name"]:
                raise ProtocolError("a function declaration needs a name", param="tools")
            params = decl.get("parametersJsonSchema", decl.get("parameters_json_schema"))
            if not isinstance(params, dict):
                params = _schema(decl["parameters"]) if isinstance(decl.get("parameters"), dict) else None
            out.append(
                ToolDef(
                    kind="function",
                    name=decl["name"],
                    description=decl.get("description") if isinstance(decl.get("description"), str) else None,
                    parameters=params or {"type": "object", "properties": {}},
                )
            )
    return out or None


def _tool_choice(raw: Any) -> Any:
    cfg = (
        raw.get("functionCallingConfig", raw.get("function_calling_config"))
        if isinstance(raw, dict)
        else None
    )
    if not isinstance(cfg, dict):
        return None
    mode = str(cfg.get("mode") or "AUTO").upper()
    allowed = cfg.get("allowedFunctionNames", cfg.get("allowed_function_names"))
    names = [n for n in allowed if isinstance(n, str)] if isinstance(allowed, list) else []
    if mode == "NONE":
        return "none"
    if mode in ("ANY", "VALIDATED"):
        if len(names) == 1:
            return {"type": "function", "function": {"name": names[0]}}
        if names:
            return {
                "type": "allowed_tools",
                "allowed_tools": {
                    "mode": "required",
                    "tools": [{"type": "function", "function": {"name": n}} for n in names],
                },
            }
        return "required"
    return "auto"


def _reasoning(cfg: Any) -> ReasoningConfig | None:
    thinking = cfg.get("thinkingConfig") if isinstance(cfg, dict) else None
    if not isinstance(thinking, dict):
        return None
    effort = _effort(thinking)
    if effort is None:
        return None
    return ReasoningConfig(effort=effort, extra={RAW_THINKING: {"effort": effort, "config": dict(thinking)}})


def _effort(thinking: dict[str, Any]) -> str | None:
    level = thinking.get("thinkingLevel")
    if isinstance(level, str) and level.lower() in _LEVELS:
        return _LEVELS[level.lower()]
    budget = thinking.get("thinkingBudget")
    if isinstance(budget, int) and not isinstance(budget, bool):
        if budget == 0:
            return "none"
        if budget < 0:
            return "medium"
        return "low" if budget <= 1024 else "medium" if budget <= 8192 else "high"
    return None


def decode_request(body: dict[str, Any]) -> Request:
    if not isinstance(body, dict):
        raise ProtocolError("request body must be a JSON object")
    contents = body.get("contents")
    if not isinstance(contents, list):
        raise ProtocolError("contents must be a list", param="contents")
    nodes: list[Node] = []
    system = body.get("systemInstruction", body.get("system_instruction"))
    if isinstance(system, dict):
        text = _text_of(system.get("parts"), "systemInstruction.parts")
        if text:
            nodes.append(TextNode(role="system", content=text))
    elif isinstance(system, str) and system:
        nodes.append(TextNode(role="system", content=system))
    pending = _Pending()
    for i, content in enumerate(contents):
        nodes.extend(_content_nodes(content, i, pending))
    raw_cfg = body.get("generationConfig")
    cfg: dict[str, Any] = raw_cfg if isinstance(raw_cfg, dict) else {}
    stops = cfg.get("stopSequences")
    number = (int, float)
    req = Request(
        model=str(body.get("model") or ""),
        input=nodes,
        stream=bool(body.get("stream")),
        temperature=cfg.get("temperature") if isinstance(cfg.get("temperature"), number) else None,
        top_p=cfg.get("topP") if isinstance(cfg.get("topP"), number) else None,
        max_output_tokens=cfg.get("maxOutputTokens") if isinstance(cfg.get("maxOutputTokens"), int) else None,
        stop=[s for s in stops if isinstance(s, str)] if isinstance(stops, list) and stops else None,
        reasoning=_reasoning(cfg),
        tools=_tools(body.get("tools")),
        tool_choice=_tool_choice(body.get("toolConfig", body.get("tool_config"))),
    )
    return req


# -- response ----------------------------------------------------------------------------------


def _signature(node: Node, same: bool) -> str | None:
    """A part's ``thoughtSignature``: Gemini's own, or (reasoning from another protocol) the
    opaque reasoning payload, so the client's replay hands the upstream its signature back."""
    sig = node.extra.get(SIGNATURE)
    if isinstance(sig, str) and sig:
        return _wire_signature(sig)
    if isinstance(node, ReasoningNode) and isinstance(node.encrypted, str) and node.encrypted:
        return _wire_signature(node.encrypted)
    return None


def _call_part(node: ToolCallNode, same: bool) -> dict[str, Any]:
    part: dict[str, Any] = {
        "functionCall": {"id": node.call_id, "name": node.name, "args": arguments_object(node.arguments)}
    }
    sig = _signature(node, same)
    if sig:
        part["thoughtSignature"] = sig
    return part


def _node_parts(node: Node, same: bool) -> list[dict[str, Any]]:
    if isinstance(node, TextNode):
        part: dict[str, Any] = {"text": node.content}
    elif isinstance(node, ReasoningNode):
        text = node.content or node.summary or ""
        part = {"text": text, "thought": True}
    elif isinstance(node, ToolCallNode):
        return [_call_part(node, same)]
    elif isinstance(node, ImageNode | FileNode) and node.source.kind == "base64" and node.source.data:
        return [
            {
                "inlineData": {
                    "mimeType": node.source.media_type or "application/octet-stream",
                    "data": node.source.data,
                }
            }
        ]
    else:
        return []
    sig = _signature(node, same)
    if sig:
        part["thoughtSignature"] = sig
    return [part] if part.get("text") or sig else []


def usage_metadata(usage: Usage | None) -> dict[str, Any] | None:
    if usage is None:
        return None
    reasoning = usage.reasoning_tokens or 0
    out = {
        "promptTokenCount": usage.input_tokens,
        "candidatesTokenCount": max(0, usage.output_tokens - reasoning),
        "totalTokenCount": usage.input_tokens + usage.output_tokens,
    }
    if reasoning:
        out["thoughtsTokenCount"] = reasoning
    if usage.cache_read_tokens:
        out["cachedContentTokenCount"] = usage.cache_read_tokens
    return out


def finish_to_wire(finish: str | None) -> str:
    return _FINISH_OUT.get(finish or "stop", "OTHER")


def _envelope(
    parts: list[dict[str, Any]],
    ctx: EncodeContext,
    response_id: str,
    *,
    finish: str | None = None,
    usage: Usage | None = None,
) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    if finish is not None:
        candidate["finishReason"] = finish
    out: dict[str, Any] = {"candidates": [candidate], "modelVersion": ctx.model, "responseId": response_id}
    meta = usage_metadata(usage)
    if meta is not None:
        out["usageMetadata"] = meta
    return out


def encode_response(resp: Response, ctx: EncodeContext) -> dict:
    same = ctx.source_protocol == PROTOCOL
    parts = [part for node in resp.output for part in _node_parts(node, same)]
    return _envelope(
        parts, ctx, resp.id or new_id("resp_"), finish=finish_to_wire(resp.finish_reason), usage=resp.usage
    )


class StreamEncoder:
    """Canonical events -> ``data: {GenerateContentResponse}`` frames (``alt=sse``)."""

    def __init__(self, ctx: EncodeContext) -> None:
        self.ctx = ctx
        self.same = ctx.source_protocol == PROTOCOL
        self.response_id = new_id("resp_")
        self.finished = False
        self.kinds: dict[int, str] = {}

    def _frame(self, parts: list[dict[str, Any]], **kw: Any) -> bytes:
        return b"data: " + orjson.dumps(_envelope(parts, self.ctx, self.response_id, **kw)) + b"\n\n"

    def encode(self, event: Any) -> bytes:
        if self.finished:
            return b""
        if isinstance(event, ev.ResponseStart):
            if event.id:
                self.response_id = event.id
            return b""
        if isinstance(event, ev.NodeStart):
            node = event.node
            self.kinds[event.index] = (
                "text"
                if isinstance(node, TextNode)
                else "thought"
                if isinstance(node, ReasoningNode)
                else "call"
                if isinstance(node, ToolCallNode)
                else "other"
            )
            return b""
        if isinstance(event, ev.NodeDelta):
            kind = self.kinds.get(event.index)
            if kind == "text" and event.kind == ev.TEXT and event.delta:
                return self._frame([{"text": event.delta}])
            if (
                kind == "thought"
                and event.kind in (ev.REASONING_CONTENT, ev.REASONING_SUMMARY)
                and event.delta
            ):
                return self._frame([{"text": event.delta, "thought": True}])
            return b""
        if isinstance(event, ev.NodeDone):
            node = event.node
            if isinstance(node, ToolCallNode):
                return self._frame([_call_part(node, self.same)])
            sig = _signature(node, self.same) if isinstance(node, TextNode | ReasoningNode) else None
            if sig:  # the signature closes its part (Gemini sends it on the part's last chunk)
                part: dict[str, Any] = {"text": "", "thoughtSignature": sig}
                if isinstance(node, ReasoningNode):
                    part["thought"] = True
                return self._frame([part])
            if isinstance(node, ImageNode | FileNode):
                return self._frame(_node_parts(node, self.same)) if _node_parts(node, self.same) else b""
            return b""
        if isinstance(event, ev.ResponseDone):
            self.finished = True
            return self._frame([{"text": ""}], finish=finish_to_wire(event.finish_reason), usage=event.usage)
        if isinstance(event, ev.StreamError):
            return self.error(event.status or 502, event.code or "upstream_stream_error", event.message)
        return b""

    def keepalive(self) -> bytes:
        return b"\n"  # an empty line: SSE parsers (and the Google SDKs) skip it

    def error(self, status: int, code: str, message: str) -> bytes:
        self.finished = True
        return b"data: " + orjson.dumps(error_body(status, code, message)) + b"\n\n"

    def close(self) -> bytes:
        if self.finished:
            return b""
        return self.error(502, "upstream_stream_incomplete", "upstream stream ended before completion")
