"""Google Gemini codec (upstream only): ``generateContent`` / ``streamGenerateContent?alt=sse``.

Gemini has no client endpoint here, so every hop into it is cross-family: the encoder writes
what Gemini can express (text, inline/file data, function calls and responses, thought parts
with their signatures) and skips the rest. Gemini has no tool-call ids on most models, so the
decoders synthesise stable ones, and a ``functionResponse`` names the *function* (looked up from
the call id), not the id.
"""

from __future__ import annotations

import mimetypes
import re
from copy import copy
from typing import Any
from urllib.parse import quote

import orjson

from gateway.errors import UpstreamProtocolError
from gateway.urp import (
    AudioNode,
    EnvelopeExtraNode,
    FileNode,
    ImageNode,
    MediaSource,
    Node,
    NodeDelta,
    NodeDone,
    NodeStart,
    ProviderItemNode,
    ReasoningNode,
    RefusalNode,
    Request,
    Response,
    ResponseDone,
    ResponseStart,
    StreamError,
    TextNode,
    ToolCallNode,
    ToolDef,
    ToolResultNode,
    Usage,
    accept_extra,
)
from gateway.urp import events as ev
from gateway.urp.nodes import INTERNAL_PREFIX

from .base import EncodeContext, arguments_object, json_text, new_id, split_data_url, token_count
from .json_depth import too_deep

PROTOCOL = "gemini"
API_VERSION = "v1beta"

SIGNATURE = "_gw_gemini_thought_signature"  # node extra: the part's thoughtSignature, replayed verbatim
WIRE_CALL_ID = "_gw_gemini_call_id"  # ToolCallNode extra: the id came from Gemini (else synthesised)
NATIVE_FINISH = "_gw_gemini_finish_reason"

_FINISH = {"STOP": "stop", "MAX_TOKENS": "length", "SAFETY": "content_filter", "RECITATION": "content_filter",
           "BLOCKLIST": "content_filter", "PROHIBITED_CONTENT": "content_filter", "SPII": "content_filter",
           "IMAGE_SAFETY": "content_filter"}
_BUDGETS = {"none": 0, "minimal": 512, "low": 1024, "medium": 8192, "high": 16384, "xhigh": 24576, "max": 24576}
_VERSION = re.compile(r"gemini-(\d+)(?:\.(\d+))?")
_SCHEMA_DROP = frozenset({"$schema", "$id", "$comment", "additionalProperties"})


# -- transport ---------------------------------------------------------------------------------

def upstream_path(model: str, stream: bool) -> str:
    """``/v1beta/models/{model}:generateContent``; the model id is one percent-encoded segment
    (a leading ``models/`` is accepted and not doubled)."""
    name = model[7:] if model.startswith("models/") else model
    seg = quote(name, safe="")
    if stream:
        return f"/{API_VERSION}/models/{seg}:streamGenerateContent?alt=sse"
    return f"/{API_VERSION}/models/{seg}:generateContent"


def upstream_headers(api_key: str) -> dict[str, str]:
    return {"x-goog-api-key": api_key, "content-type": "application/json"}


# -- request encode ----------------------------------------------------------------------------

def clean_schema(schema: Any) -> Any:
    """JSON Schema -> the OpenAPI subset Gemini's ``parameters``/``responseSchema`` accept:
    drops ``$schema``, ``$id``, ``$comment`` and ``additionalProperties`` at every level (Gemini
    answers 400 to them) and turns ``type: [X, "null"]`` into ``type: X, nullable: true``,
    never touching property *names*."""
    if isinstance(schema, list):
        return [clean_schema(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in _SCHEMA_DROP:
            continue
        if key == "type" and isinstance(value, list):
            # JSON Schema ["string", "null"] -> OpenAPI type + nullable (Gemini takes one type)
            kinds = [k for k in value if k != "null"]
            if kinds:
                out["type"] = kinds[0]
            if "null" in value:
                out["nullable"] = True
            continue
        if key in ("properties", "$defs", "definitions") and isinstance(value, dict):
            out[key] = {name: clean_schema(sub) for name, sub in value.items()}
        else:
            out[key] = clean_schema(value)
    return out


def _media_part(src: MediaSource, default_mime: str) -> dict[str, Any] | None:
    if src.kind == "base64" and src.data is not None:
        return {"inlineData": {"mimeType": src.media_type or default_mime, "data": src.data}}
    if src.kind == "url" and src.url:
        parts = split_data_url(src.url)
        if parts is not None:
            return {"inlineData": {"mimeType": parts[0], "data": parts[1]}}
        mime = src.media_type or mimetypes.guess_type(src.url.split("?", 1)[0])[0] or default_mime
        return {"fileData": {"mimeType": mime, "fileUri": src.url}}
    if src.kind == "text" and src.text is not None:
        return {"text": src.text}
    return None


def _function_response(node: ToolResultNode, name: str) -> dict[str, Any]:
    """Gemini's documented convention: ``{"output": ...}`` for results, ``{"error": ...}`` for
    failures (the reference's ``{result, is_error}`` is not what the model was trained on)."""
    texts = [c.content for c in node.content if isinstance(c, TextNode)]
    text = "\n".join(texts)
    fr: dict[str, Any] = {"name": name, "response": {"error" if node.is_error else "output": text}}
    return {"functionResponse": fr}


def _node_part(node: Node, call_names: dict[str, str], wire_ids: set[str]) -> tuple[str, dict[str, Any]] | None:
    """(gemini role, part) for one node; None when Gemini cannot express it."""
    if isinstance(node, TextNode):
        sig = node.extra.get(SIGNATURE)
        if not node.content and not sig:
            return None
        part: dict[str, Any] = {"text": node.content}
        if sig:
            part["thoughtSignature"] = sig
        return ("model" if node.role == "assistant" else "user"), part
    if isinstance(node, ToolCallNode):
        if node.tool_type != "function":
            return None
        call_names[node.call_id] = node.name
        fc: dict[str, Any] = {"name": node.name, "args": arguments_object(node.arguments)}
        if node.extra.get(WIRE_CALL_ID):
            fc["id"] = node.call_id
            wire_ids.add(node.call_id)
        part = {"functionCall": fc}
        if node.extra.get(SIGNATURE):
            part["thoughtSignature"] = node.extra[SIGNATURE]
        return "model", part
    if isinstance(node, ToolResultNode):
        if node.tool_type != "function":
            return None
        part = _function_response(node, call_names.get(node.call_id, node.call_id))
        if node.call_id in wire_ids:
            part["functionResponse"]["id"] = node.call_id
        return "user", part
    if isinstance(node, ReasoningNode):
        # Only Gemini's own thought signatures can be replayed; other providers' reasoning is
        # opaque to Gemini and would be rejected.
        sig = node.extra.get(SIGNATURE)
        if not sig:
            return None
        return "model", {"text": node.summary or node.content or "", "thought": True, "thoughtSignature": sig}
    if isinstance(node, ImageNode | FileNode | AudioNode):
        default = {"ImageNode": "image/png", "AudioNode": "audio/wav"}.get(type(node).__name__, "application/pdf")
        part = _media_part(node.source, default)
        if part is None:
            return None
        return ("model" if node.role == "assistant" else "user"), part
    if isinstance(node, RefusalNode):
        return ("model", {"text": node.content}) if node.content else None
    if isinstance(node, ProviderItemNode) and node.origin_protocol == PROTOCOL:
        return ("model" if node.role == "assistant" else "user"), dict(node.body)
    return None


def _tools(tools: list[ToolDef]) -> list[dict[str, Any]]:
    decls: list[dict[str, Any]] = []
    native: list[dict[str, Any]] = []
    for tool in tools:
        if tool.kind == "function" and tool.name:
            decl: dict[str, Any] = {"name": tool.name}
            if tool.description:
                decl["description"] = tool.description
            params = tool.parameters
            # Gemini rejects an OBJECT schema without properties: a no-argument tool omits it.
            if isinstance(params, dict) and (params.get("properties") or params.get("type") not in (None, "object")):
                decl["parameters"] = clean_schema(params)
            decls.append(decl)
        elif tool.origin_protocol == PROTOCOL:
            native.append({k: v for k, v in tool.extra.items() if not k.startswith(INTERNAL_PREFIX)})
    out: list[dict[str, Any]] = [{"functionDeclarations": decls}] if decls else []
    return out + native


def _tool_config(choice: Any, names: list[str]) -> dict[str, Any] | None:
    if choice is None:
        return None
    cfg: dict[str, Any]
    if choice == "auto":
        cfg = {"mode": "AUTO"}
    elif choice == "required":
        cfg = {"mode": "ANY"}
    elif choice == "none":
        cfg = {"mode": "NONE"}
    elif isinstance(choice, dict) and choice.get("type") == "function":
        name = (choice.get("function") or {}).get("name")
        if not name:
            return None
        cfg = {"mode": "ANY", "allowedFunctionNames": [name]}
    elif isinstance(choice, dict) and choice.get("type") == "allowed_tools":
        spec = choice.get("allowed_tools") or {}
        allowed = [t.get("function", {}).get("name") or t.get("name") for t in spec.get("tools") or []
                   if isinstance(t, dict)]
        allowed = [n for n in allowed if n in names]
        cfg = {"mode": "ANY" if spec.get("mode") == "required" else "AUTO"}
        if allowed:
            cfg["allowedFunctionNames"] = allowed
    else:
        return None
    return {"functionCallingConfig": cfg}


def thinking_config(effort: str | None, model: str) -> dict[str, Any] | None:
    """Effort -> ``thinkingConfig``: Gemini 3+ takes a ``thinkingLevel`` (low/high), 2.5 and
    unversioned aliases a ``thinkingBudget``. ``none`` turns thinking off where the model
    allows it (Pro models cannot: they get their minimum budget, 128)."""
    if effort is None:
        return None
    name = model.lower()
    m = _VERSION.search(name)
    version = (int(m.group(1)), int(m.group(2) or 0)) if m else None
    if version is not None and version < (2, 5):
        return None  # 1.x / 2.0 have no thinking controls
    major = version[0] if version else None
    if major is not None and major >= 3:
        level = "low" if effort in ("none", "minimal", "low") else "high"
        return {"thinkingLevel": level, "includeThoughts": True}
    budget = _BUDGETS.get(effort, 8192)
    if budget == 0 and "pro" in name:
        budget = 128
    cfg: dict[str, Any] = {"thinkingBudget": budget}
    if budget:
        cfg["includeThoughts"] = True
    return cfg


SKIP_SIGNATURE = "skip_thought_signature_validator"


def _major(model: str) -> int:
    """Gemini major version; unversioned aliases count as current (3)."""
    m = _VERSION.search(model.lower())
    return int(m.group(1)) if m else 3


def _sign_function_calls(contents: list[dict[str, Any]]) -> None:
    """Gemini 3 rejects a model turn whose first functionCall lacks a thoughtSignature. History
    that went through another protocol's client lost it, so the documented sentinel is put there
    (real signatures are never replaced)."""
    for content in contents:
        if content["role"] != "model":
            continue
        for part in content["parts"]:
            if "functionCall" in part:
                part.setdefault("thoughtSignature", SKIP_SIGNATURE)
                break


def encode_request(req: Request, ctx: EncodeContext) -> dict:
    """Request -> generateContent body. Consecutive same-role parts share one content entry."""
    call_names: dict[str, str] = {}
    wire_ids: set[str] = set()
    system_parts: list[dict[str, Any]] = []
    contents: list[dict[str, Any]] = []
    role: str | None = None
    parts: list[dict[str, Any]] = []
    for node in req.input:
        if isinstance(node, EnvelopeExtraNode):
            continue
        if getattr(node, "role", None) in ("system", "developer") and not isinstance(node, ToolResultNode):
            if isinstance(node, TextNode) and node.content:
                system_parts.append({"text": node.content})
            continue
        got = _node_part(node, call_names, wire_ids)
        if got is None:
            continue
        prole, part = got
        if prole != role and parts:
            contents.append({"role": role, "parts": parts})
            parts = []
        role = prole
        parts.append(part)
    if parts:
        contents.append({"role": role, "parts": parts})

    if _major(ctx.model) >= 3:
        _sign_function_calls(contents)
    body: dict[str, Any] = {"contents": contents}
    if system_parts:
        body["systemInstruction"] = {"parts": system_parts}
    raw_gc = req.extra.get("generationConfig")
    gc: dict[str, Any] = dict(raw_gc) if isinstance(raw_gc, dict) else {}
    if req.temperature is not None:
        gc["temperature"] = req.temperature
    if req.top_p is not None:
        gc["topP"] = req.top_p
    if req.max_output_tokens is not None:
        gc["maxOutputTokens"] = req.max_output_tokens
    if req.stop is not None:
        gc["stopSequences"] = [req.stop] if isinstance(req.stop, str) else list(req.stop)
    tc = thinking_config(req.reasoning.effort if req.reasoning else None, ctx.model)
    if tc is not None:
        gc["thinkingConfig"] = tc
    rf = req.response_format
    if rf is not None and rf.type == "json_schema":
        gc["responseMimeType"] = "application/json"
        if rf.schema is not None:
            gc["responseSchema"] = clean_schema(rf.schema)
    elif rf is not None and rf.type == "json_object":
        gc["responseMimeType"] = "application/json"
    if gc:
        body["generationConfig"] = gc
    if req.tools:
        tools = _tools(req.tools)
        if tools:
            body["tools"] = tools
            names = [d["name"] for t in tools for d in t.get("functionDeclarations", [])]
            cfg = _tool_config(req.tool_choice, names)
            if cfg is not None:
                body["toolConfig"] = cfg
    for key, value in req.extra.items():
        if key not in body and key != "generationConfig" and not key.startswith(INTERNAL_PREFIX):
            body[key] = value
    return body


# -- response decode ---------------------------------------------------------------------------

def _int(value: Any) -> int:
    return token_count(value) or 0


def decode_usage(raw: Any) -> Usage | None:
    """usageMetadata -> Usage: input = prompt + tool-use prompt (cached tokens are already part
    of the prompt count), output = candidates + thoughts."""
    if not isinstance(raw, dict):
        return None
    thoughts = raw.get("thoughtsTokenCount")
    cached = raw.get("cachedContentTokenCount")
    known = ("promptTokenCount", "toolUsePromptTokenCount", "candidatesTokenCount", "thoughtsTokenCount",
             "cachedContentTokenCount", "totalTokenCount")
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
    return UpstreamProtocolError(str(err.get("message") or "upstream returned an error"), code=code.lower(),
                                 status=status, error_type=code)


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
        return ToolCallNode(call_id=call_id, name=str(fc.get("name") or ""),
                            arguments=json_text(args if isinstance(args, dict) else {}), extra=extra)


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


def decode_response(body: dict) -> Response:
    if not isinstance(body, dict):
        raise UpstreamProtocolError("upstream response is not a JSON object")
    if "error" in body:
        raise _error(body)
    rid = body.get("responseId") if isinstance(body.get("responseId"), str) else None
    model = str(body.get("modelVersion") or "")
    candidates = body.get("candidates")
    usage = decode_usage(body.get("usageMetadata"))
    if not isinstance(candidates, list) or not candidates:
        feedback = body.get("promptFeedback")
        if isinstance(feedback, dict) and feedback.get("blockReason"):
            return Response(id=rid or new_id("gemini-", 8), model=model, output=[],
                            finish_reason="content_filter", usage=usage,
                            extra={NATIVE_FINISH: feedback["blockReason"]})
        raise UpstreamProtocolError("upstream response has no candidates")
    cand = candidates[0] if isinstance(candidates[0], dict) else {}
    content = cand.get("content") if isinstance(cand.get("content"), dict) else {}
    parts = content.get("parts") if isinstance(content.get("parts"), list) else []
    output = _parts_to_nodes(parts, _Calls(rid))
    native = cand.get("finishReason")
    return Response(id=rid or new_id("gemini-", 8), model=model, output=output,
                    finish_reason=_finish(native, output), usage=usage,
                    extra={NATIVE_FINISH: native} if native else {})


# -- stream decode -----------------------------------------------------------------------------

class StreamDecoder:
    """``streamGenerateContent?alt=sse``: every data line is a whole GenerateContentResponse
    chunk. Consecutive text (or thought) parts across chunks grow one node; a function call is a
    complete node on arrival. The chunk carrying ``finishReason`` is terminal (its usage is the
    final one); EOF before it is an error."""

    def __init__(self) -> None:
        self.finished = False
        self._started = False
        self._calls: _Calls | None = None
        self._nodes: list[Node] = []
        self._open: int | None = None  # index of the text/thought node still growing
        self._usage: Usage | None = None

    def _fail(self, message: str, code: str, **kw: Any) -> list:
        self.finished = True
        return [StreamError(message=message, code=code, **kw)]

    def _close_open(self) -> list:
        if self._open is None:
            return []
        index, self._open = self._open, None
        return [NodeDone(index=index, node=copy(self._nodes[index]))]

    def _new(self, node: Node) -> list:
        index = len(self._nodes)
        self._nodes.append(node)
        header = copy(node)
        header.extra = dict(node.extra)  # the working node keeps growing; the header must not
        if isinstance(header, ToolCallNode):
            header.arguments = ""  # a header carries no content; the arguments follow as a delta
        return [NodeStart(index=index, node=header)]

    def _whole(self, node: Node, delta: tuple[str, str] | None = None) -> list:
        out = self._close_open() + self._new(node)
        index = len(self._nodes) - 1
        if delta is not None:
            out.append(NodeDelta(index=index, kind=delta[0], delta=delta[1]))
        out.append(NodeDone(index=index, node=copy(node)))
        return out

    def _text_part(self, part: dict[str, Any]) -> list:
        text = part.get("text") if isinstance(part.get("text"), str) else ""
        sig = part.get("thoughtSignature")
        thought = bool(part.get("thought"))
        out: list = []
        current = self._nodes[self._open] if self._open is not None else None
        fits = isinstance(current, ReasoningNode) if thought else isinstance(current, TextNode)
        if not fits or (current is not None and current.extra.get(SIGNATURE)):
            if not text and sig and current is not None and not current.extra.get(SIGNATURE) and not thought:
                fits = True  # a trailing empty part that only carries the signature
            else:
                out.extend(self._close_open())
                out.extend(self._new(ReasoningNode(summary="") if thought else TextNode(role="assistant")))
                self._open = len(self._nodes) - 1
        index = self._open
        assert index is not None
        node = self._nodes[index]
        if text:
            if isinstance(node, ReasoningNode):
                node.summary = (node.summary or "") + text
                out.append(NodeDelta(index=index, kind=ev.REASONING_SUMMARY, delta=text))
            elif isinstance(node, TextNode):
                node.content += text
                out.append(NodeDelta(index=index, kind=ev.TEXT, delta=text))
        if sig:
            node.extra[SIGNATURE] = sig
            if isinstance(node, ReasoningNode):
                node.encrypted = sig
                out.append(NodeDelta(index=index, kind=ev.REASONING_ENCRYPTED, delta=sig))
        return out

    def _chunk(self, chunk: Any) -> list:
        if not isinstance(chunk, dict):
            return self._fail("upstream stream chunk is not an object", "invalid_upstream_response")
        if "error" in chunk:
            err = _error(chunk)
            return self._fail(err.message, err.code, status=err.status, error_type=err.error_type)
        out: list = []
        if not self._started:
            self._started = True
            rid = chunk.get("responseId") if isinstance(chunk.get("responseId"), str) else None
            self._calls = _Calls(rid)
            out.append(ResponseStart(id=rid or new_id("gemini-", 8),
                                     model=str(chunk.get("modelVersion") or "")))
        assert self._calls is not None
        usage = decode_usage(chunk.get("usageMetadata"))
        if usage is not None:
            self._usage = usage
        candidates = chunk.get("candidates")
        cand = candidates[0] if isinstance(candidates, list) and candidates and isinstance(candidates[0], dict) else {}
        content = cand.get("content") if isinstance(cand.get("content"), dict) else {}
        parts = content.get("parts")
        for part in parts if isinstance(parts, list) else ():
            if not isinstance(part, dict):
                continue
            if "text" in part:
                out.extend(self._text_part(part))
            elif isinstance(part.get("functionCall"), dict):
                call = self._calls.node(part["functionCall"], part)
                out.extend(self._whole(call, (ev.ARGUMENTS, call.arguments)))
            elif isinstance(part.get("inlineData"), dict):
                out.extend(self._whole(_media_node(part["inlineData"])))
            else:
                kind = next((k for k in part if k != "thoughtSignature"), "unknown")
                out.extend(self._whole(ProviderItemNode(origin_protocol=PROTOCOL, item_type=kind, body=part)))
        native = cand.get("finishReason")
        feedback = chunk.get("promptFeedback")
        if not native and isinstance(feedback, dict) and feedback.get("blockReason"):
            native = "SAFETY"
        if isinstance(native, str) and native:
            out.extend(self._close_open())
            output = list(self._nodes)
            out.append(ResponseDone(output=output, finish_reason=_finish(native, output), usage=self._usage,
                                    extra={NATIVE_FINISH: native}))
            self.finished = True
        return out

    def feed(self, event_name: str | None, data: str) -> list:
        if self.finished:
            return []
        if data.strip() == "[DONE]":
            return self._fail("upstream stream ended without a finishReason", "upstream_stream_incomplete")
        try:
            chunk = orjson.loads(data)
        except orjson.JSONDecodeError:
            return self._fail("upstream sent invalid JSON in a stream chunk", "invalid_upstream_response")
        if too_deep(chunk, data):
            return self._fail("upstream stream chunk is nested too deeply", "invalid_upstream_response")
        chunks = chunk if isinstance(chunk, list) else [chunk]
        out: list = []
        for item in chunks:
            out.extend(self._chunk(item))
            if self.finished:
                break
        return out

    def close(self) -> list:
        if self.finished:
            return []
        return self._fail("upstream stream ended without a finishReason", "upstream_stream_incomplete")
