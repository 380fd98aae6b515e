"""Chat Completions wire -> URP: requests (client side) and whole responses (upstream side).

Decoding is flat: every message becomes a run of nodes in source order; only encoders group.
Whatever a same-Chat hop needs to rebuild the exact wire body (content shape, raw reasoning
entries, which max-tokens key was used...) rides along under ``_gw_chat_*`` internal keys.
"""

from __future__ import annotations

from typing import Any

import orjson

from gateway.errors import ProtocolError, UpstreamProtocolError
from gateway.urp import (
    AudioNode,
    EnvelopeExtraNode,
    FileNode,
    ImageNode,
    MediaSource,
    Node,
    ProviderItemNode,
    ReasoningConfig,
    ReasoningNode,
    RefusalNode,
    Request,
    Response,
    ResponseFormat,
    TextNode,
    ToolCallNode,
    ToolDef,
    ToolResultNode,
    accept_extra,
)
from gateway.urp.request import REASONING_EFFORTS

from .base import json_text, split_data_url
from .chat_common import (
    CHOICE_EXTRA,
    FILE_ID_ORIGIN,
    INNER_EXTRA,
    LEGACY_FUNCTION,
    LEGACY_PREFIX,
    MAX_TOKENS_FIELD,
    MESSAGE_AUDIO,
    MSG_SHAPE,
    NATIVE_FINISH,
    PROTOCOL,
    REASONING_CONFIG,
    REASONING_DETAIL,
    REASONING_EFFORT_RAW,
    REASONING_SURFACE,
    RESULT_SHAPE,
    THINKING_CONFIG,
    decode_usage,
    finish_from_wire,
    folds_into,
)

_REQUEST_KEYS = frozenset({
    "model", "messages", "stream", "temperature", "top_p", "max_completion_tokens", "max_tokens",
    "reasoning_effort", "reasoning", "thinking", "tools", "tool_choice", "parallel_tool_calls", "stop",
    "verbosity", "response_format", "user", "functions", "function_call",
})
_MESSAGE_KEYS = frozenset({
    "role", "content", "tool_calls", "tool_call_id", "refusal", "reasoning_details", "reasoning",
    "reasoning_content", "audio", "function_call", "name",
})
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
        return ImageNode(role=role, source=MediaSource(kind="url", url=inner["url"], detail=inner.get("detail")),
                         extra=extra)
    if ptype == "input_audio":
        inner = part.get("input_audio")
        if not isinstance(inner, dict) or not isinstance(inner.get("data"), str):
            raise ProtocolError("input_audio part needs input_audio.data", param=f"{where}.input_audio")
        fmt = inner.get("format")
        extra = accept_extra(part, {"type", "input_audio"})
        _inner(inner, _AUDIO_KEYS, extra)
        return AudioNode(role=role, source=MediaSource(kind="base64", data=inner["data"],
                                                       media_type=f"audio/{fmt}" if isinstance(fmt, str) else None),
                         extra=extra)
    if ptype == "file":
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
                source = MediaSource(kind="base64", media_type=split[0], data=split[1], filename=inner.get("filename"))
            else:  # bare base64: the media type is unknown
                source = MediaSource(kind="base64", data=raw, filename=inner.get("filename"))
        else:
            raise ProtocolError("file part needs file_id or file_data", param=f"{where}.file")
        return FileNode(role=role, source=source, extra=extra)
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
        return ToolCallNode(call_id=call_id, name=inner["name"], tool_type="custom",
                            arguments=json_text(args), extra=extra)
    inner = call.get("function")
    if not isinstance(inner, dict) or not isinstance(inner.get("name"), str):
        raise ProtocolError("tool call needs function.name", param=f"{where}.function")
    _inner(inner, frozenset({"name", "arguments"}), extra)
    return ToolCallNode(call_id=call_id, name=inner["name"], arguments=json_text(inner.get("arguments", "")),
                        extra=extra)


def _content_nodes(content: Any, role: str, where: str) -> tuple[list[Node], str]:
    """Message content -> nodes plus the wire shape (for a lossless same-Chat replay)."""
    if content is None:
        return [], "null"
    if isinstance(content, str):
        return [TextNode(role=role, content=content)], "string"
    if isinstance(content, list):
        return [decode_part(p, role, f"{where}[{i}]") for i, p in enumerate(content)], "array"
    raise ProtocolError("content must be a string, an array of parts or null", param=where)


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
    nodes: list[Node] = []
    if role == "tool":
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
        for key in ("name", "refusal", "tool_calls", "reasoning", "reasoning_content", "reasoning_details",
                    "audio", "function_call"):
            if key in msg:
                env[key] = msg[key]
        nodes.append(ToolResultNode(call_id=call_id, content=parts, tool_type=call_types.get(call_id, "function"),
                                    extra={RESULT_SHAPE: shape}))
    elif role == "function":
        name = msg.get("name")
        if not isinstance(name, str) or not name:
            raise ProtocolError("function message needs a 'name'", param=f"{where}.name")
        content = msg.get("content")
        text = content if isinstance(content, str) else ("" if content is None else orjson.dumps(content).decode())
        nodes.append(ToolResultNode(call_id=LEGACY_PREFIX + name, content=[TextNode(content=text)],
                                    extra={LEGACY_FUNCTION: True, RESULT_SHAPE: "string"}))
    elif role in _ORDINARY_ROLES:
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
        if "content" in msg:
            content_nodes, shape = _content_nodes(msg["content"], role, f"{where}.content")
        elif role == "assistant":
            content_nodes, shape = [], "absent"
        else:
            raise ProtocolError(f"{role} message needs 'content'", param=f"{where}.content")
        nodes.extend(content_nodes)
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
            nodes.append(ToolCallNode(call_id=LEGACY_PREFIX + fc["name"], name=fc["name"],
                                      arguments=json_text(args),
                                      extra={LEGACY_FUNCTION: True}))
        elif "function_call" in msg:
            env["function_call"] = fc
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
        return ToolDef(kind="function", name=fn["name"], description=fn.get("description"), parameters=params,
                       strict=fn.get("strict"), extra=accept_extra(tool, {"type", "function"}),
                       inner_extra=accept_extra(fn, {"name", "description", "parameters", "strict"}))
    if kind == "custom":
        cu = tool.get("custom")
        if not isinstance(cu, dict) or not isinstance(cu.get("name"), str) or not cu["name"]:
            raise ProtocolError("custom tool needs custom.name", param=f"{where}.custom.name")
        return ToolDef(kind="custom", name=cu["name"], description=cu.get("description"), format=cu.get("format"),
                       extra=accept_extra(tool, {"type", "custom"}),
                       inner_extra=accept_extra(cu, {"name", "description", "format"}))
    return ToolDef(kind=kind, name=tool.get("name") if isinstance(tool.get("name"), str) else None,
                   origin_protocol=PROTOCOL, extra=accept_extra(tool, {"type"}))


def decode_response_format(rf: Any) -> ResponseFormat:
    if not isinstance(rf, dict) or rf.get("type") not in ("text", "json_object", "json_schema"):
        raise ProtocolError("response_format.type must be text, json_object or json_schema",
                            param="response_format")
    if rf["type"] != "json_schema":
        return ResponseFormat(type=rf["type"], extra=accept_extra(rf, {"type"}))
    js = rf.get("json_schema")
    if not isinstance(js, dict) or not isinstance(js.get("name"), str):
        raise ProtocolError("json_schema response_format needs json_schema.name", param="response_format.json_schema")
    return ResponseFormat(type="json_schema", name=js["name"], description=js.get("description"),
                          schema=js.get("schema"), strict=js.get("strict"),
                          extra=accept_extra(js, {"name", "description", "schema", "strict"}))


# -- request ------------------------------------------------------------------------------

def _number(body: dict[str, Any], key: str) -> float | None:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ProtocolError(f"'{key}' must be a number", param=key)
    return value


def _int_field(body: dict[str, Any], key: str) -> int | None:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ProtocolError(f"'{key}' must be an integer", param=key)
    return value


def decode_request(body: dict) -> Request:
    """Client Chat Completions body -> Request. Raises ProtocolError naming the bad field."""
    if not isinstance(body, dict):
        raise ProtocolError("request body must be a JSON object")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise ProtocolError("'model' is required", param="model")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ProtocolError("'messages' must be a non-empty array", param="messages")
    n = body.get("n")
    if n is not None and n != 1:
        raise ProtocolError("only n=1 is supported", param="n")
    stream = body.get("stream")
    if stream is not None and not isinstance(stream, bool):
        raise ProtocolError("'stream' must be a boolean", param="stream")

    extra = accept_extra(body, _REQUEST_KEYS)
    # known keys sent as explicit null stay null on a same-Chat hop
    for key in _REQUEST_KEYS:
        if key in body and body[key] is None and key not in ("model", "messages"):
            extra[key] = None

    req = Request(model=model, stream=stream, extra=extra)
    req.temperature = _number(body, "temperature")
    req.top_p = _number(body, "top_p")
    mct = _int_field(body, "max_completion_tokens")
    mt = _int_field(body, "max_tokens")
    if mct is not None:
        req.max_output_tokens = mct
        if mt is not None:
            extra["max_tokens"] = mt
    elif mt is not None:
        req.max_output_tokens = mt
        extra[MAX_TOKENS_FIELD] = "max_tokens"

    # reasoning controls: reasoning_effort, OpenRouter `reasoning` object, DeepSeek `thinking`
    rextra: dict[str, Any] = {}
    effort = None
    if body.get("reasoning_effort") is not None:
        raw = body["reasoning_effort"]
        if not isinstance(raw, str):
            raise ProtocolError("'reasoning_effort' must be a string", param="reasoning_effort")
        effort = normalise_effort(raw)
        rextra[REASONING_EFFORT_RAW] = raw
    if isinstance(body.get("reasoning"), dict):
        rextra[REASONING_CONFIG] = body["reasoning"]
        if effort is None:
            effort = normalise_effort(body["reasoning"].get("effort"))
            if effort is None and body["reasoning"].get("enabled") is False:
                effort = "none"
    elif body.get("reasoning") is not None:
        raise ProtocolError("'reasoning' must be an object", param="reasoning")
    if isinstance(body.get("thinking"), dict):
        rextra[THINKING_CONFIG] = body["thinking"]
        if effort is None and body["thinking"].get("type") == "disabled":
            effort = "none"
    elif body.get("thinking") is not None:
        extra["thinking"] = body["thinking"]
    if rextra or effort is not None:
        req.reasoning = ReasoningConfig(effort=effort, extra=rextra)

    tools = body.get("tools")
    if tools is not None:
        if not isinstance(tools, list):
            raise ProtocolError("'tools' must be an array", param="tools")
        req.tools = [decode_tool(t, f"tools[{i}]") for i, t in enumerate(tools)]
    functions = body.get("functions")
    if functions is not None:  # deprecated: function tools marked legacy for a same-Chat replay
        if not isinstance(functions, list):
            raise ProtocolError("'functions' must be an array", param="functions")
        legacy = []
        for i, fn in enumerate(functions):
            tool = decode_tool({"type": "function", "function": fn}, f"functions[{i}]")
            tool.extra[LEGACY_FUNCTION] = True
            legacy.append(tool)
        req.tools = (req.tools or []) + legacy
    choice = body.get("tool_choice")
    if choice is not None:
        if isinstance(choice, str):
            req.tool_choice = choice
        elif isinstance(choice, dict):
            req.tool_choice = accept_extra(choice, ())
        else:
            raise ProtocolError("'tool_choice' must be a string or an object", param="tool_choice")
    fc = body.get("function_call")
    if fc is not None:
        if choice is None and isinstance(fc, str):
            req.tool_choice = fc
            extra[LEGACY_FUNCTION] = True
        elif choice is None and isinstance(fc, dict) and isinstance(fc.get("name"), str):
            req.tool_choice = {"type": "function", "function": {"name": fc["name"]}}
            extra[LEGACY_FUNCTION] = True
        else:
            extra["function_call"] = fc
    ptc = body.get("parallel_tool_calls")
    if ptc is not None:
        if not isinstance(ptc, bool):
            raise ProtocolError("'parallel_tool_calls' must be a boolean", param="parallel_tool_calls")
        req.parallel_tool_calls = ptc
    stop = body.get("stop")
    if stop is not None:
        if not (isinstance(stop, str) or (isinstance(stop, list) and all(isinstance(s, str) for s in stop))):
            raise ProtocolError("'stop' must be a string or an array of strings", param="stop")
        req.stop = stop
    if body.get("verbosity") is not None:
        req.verbosity = body["verbosity"]
    if body.get("response_format") is not None:
        req.response_format = decode_response_format(body["response_format"])
    if body.get("user") is not None:
        if not isinstance(body["user"], str):
            raise ProtocolError("'user' must be a string", param="user")
        req.user = body["user"]

    call_types: dict[str, str] = {}
    out: list[Node] = []
    for i, msg in enumerate(messages):
        decode_message(msg, f"messages[{i}]", call_types, out)
    req.input = out
    return req


# -- response -----------------------------------------------------------------------------

_RESPONSE_KEYS = frozenset({"id", "object", "created", "model", "choices", "usage"})
_CHOICE_KEYS = frozenset({"index", "message", "finish_reason"})


def raise_embedded_error(err: Any) -> None:
    """An ``error`` object inside a 200 body is a failed attempt, not a success."""
    if isinstance(err, dict):
        message = err.get("message") if isinstance(err.get("message"), str) else "upstream error"
        code = err.get("code")
        etype = err.get("type") if isinstance(err.get("type"), str) else None
        raise UpstreamProtocolError(message, code=str(code) if code is not None else "upstream_error",
                                    status=code if isinstance(code, int) else None, error_type=etype)
    raise UpstreamProtocolError(str(err) if err else "upstream error", code="upstream_error")


def decode_response(body: dict) -> Response:
    """Upstream Chat completion -> Response. Embedded errors and garbage raise
    UpstreamProtocolError."""
    if not isinstance(body, dict):
        raise UpstreamProtocolError("upstream body is not a JSON object")
    if body.get("error"):
        raise_embedded_error(body["error"])
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise UpstreamProtocolError("upstream response has no choices")
    choice = choices[0]
    if choice.get("error"):
        raise_embedded_error(choice["error"])
    native = choice.get("finish_reason")
    if native == "error":
        raise UpstreamProtocolError("upstream finished with an error", code="upstream_error")
    msg = choice.get("message")
    if not isinstance(msg, dict):
        raise UpstreamProtocolError("upstream choice has no message")
    msg = msg if msg.get("role") else {**msg, "role": "assistant"}
    if msg.get("role") != "assistant":
        raise UpstreamProtocolError("upstream message role is not assistant")
    out: list[Node] = []
    try:
        decode_message(msg, "choices[0].message", {}, out)
    except ProtocolError as exc:
        raise UpstreamProtocolError(f"bad upstream message: {exc.message}") from exc
    extra = accept_extra(body, _RESPONSE_KEYS)
    if native is not None:
        extra[NATIVE_FINISH] = native
    choice_extra = accept_extra(choice, _CHOICE_KEYS)
    if choice_extra:
        extra[CHOICE_EXTRA] = choice_extra
    if "usage" in body and body["usage"] is None:
        extra["usage"] = None
    rid = body.get("id")
    created = body.get("created")
    return Response(
        id=rid if isinstance(rid, str) and rid else "chatcmpl-unknown",
        model=body.get("model") if isinstance(body.get("model"), str) else "",
        output=out,
        finish_reason=finish_from_wire(native),
        usage=decode_usage(body.get("usage")),
        created=created if isinstance(created, int) else None,
        extra=extra,
    )
