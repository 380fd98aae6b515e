"""Gemini request bodies: Request -> ``generateContent`` body (upstream only; Gemini has no
client endpoint here). Cleans JSON Schemas to the OpenAPI subset, maps effort to a thinking
config, and signs replayed function calls."""

from __future__ import annotations

import mimetypes
import re
from typing import Any

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
    Request,
    TextNode,
    ToolCallNode,
    ToolDef,
    ToolResultNode,
)
from gateway.urp.nodes import INTERNAL_PREFIX

from ..base import EncodeContext, arguments_object, split_data_url
from .common import PROTOCOL, RAW_RESPONSE, RAW_THINKING, SIGNATURE, WIRE_CALL_ID

_BUDGETS = {
    "none": 0,
    "minimal": 512,
    "low": 1024,
    "medium": 8192,
    "high": 16384,
    "xhigh": 24576,
    "max": 24576,
}
_VERSION = re.compile(r"gemini-(\d+)(?:\.(\d+))?")
_SCHEMA_DROP = frozenset({"$schema", "$id", "$comment", "additionalProperties"})


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
    raw = node.extra.get(RAW_RESPONSE)
    if isinstance(raw, dict) and raw.get("text") == text and not node.is_error:  # a Gemini client's own
        return {"functionResponse": {"name": name, "response": raw["response"]}}
    fr: dict[str, Any] = {"name": name, "response": {"error" if node.is_error else "output": text}}
    return {"functionResponse": fr}


def _node_part(
    node: Node, call_names: dict[str, str], wire_ids: set[str]
) -> tuple[str, dict[str, Any]] | None:
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
        default = {"ImageNode": "image/png", "AudioNode": "audio/wav"}.get(
            type(node).__name__, "application/pdf"
        )
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
            if isinstance(params, dict) and (
                params.get("properties") or params.get("type") not in (None, "object")
            ):
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
        allowed = [
            t.get("function", {}).get("name") or t.get("name")
            for t in spec.get("tools") or []
            if isinstance(t, dict)
        ]
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


def _contents(req: Request) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The nodes -> (systemInstruction parts, ``contents``); consecutive same-role parts share
    one content entry."""
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
    return system_parts, contents


def _generation_config(req: Request, model: str) -> dict[str, Any]:
    """``generationConfig``: the client's raw one (if any) overlaid with sampling, stop,
    thinking and structured-output settings."""
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
    rc = req.reasoning
    raw = rc.extra.get(RAW_THINKING) if rc is not None else None
    if (
        rc is not None and isinstance(raw, dict) and raw.get("effort") == rc.effort
    ):  # a Gemini client's, unchanged
        tc = raw.get("config")
    else:
        tc = thinking_config(rc.effort if rc is not None else None, model)
    if tc is not None:
        gc["thinkingConfig"] = tc
    rf = req.response_format
    if rf is not None and rf.type == "json_schema":
        gc["responseMimeType"] = "application/json"
        if rf.schema is not None:
            gc["responseSchema"] = clean_schema(rf.schema)
    elif rf is not None and rf.type == "json_object":
        gc["responseMimeType"] = "application/json"
    return gc


def encode_request(req: Request, ctx: EncodeContext) -> dict:
    """Request -> generateContent body. Consecutive same-role parts share one content entry."""
    system_parts, contents = _contents(req)

    if _major(ctx.model) >= 3:
        _sign_function_calls(contents)
    body: dict[str, Any] = {"contents": contents}
    if system_parts:
        body["systemInstruction"] = {"parts": system_parts}
    gc = _generation_config(req, ctx.model)
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
