"""Chat Completions request bodies: client wire -> Request, and Request -> upstream wire.

Decoding validates the top-level fields one named step at a time (sampling, reasoning controls,
tools, the rest) and hands every message to ``decode.decode_message``; encoding groups the
nodes back into messages with ``encode.encode_messages``.
"""

from __future__ import annotations

from typing import Any

from gateway.errors import ProtocolError
from gateway.urp import (
    Node,
    ReasoningConfig,
    Request,
    accept_extra,
)

from ..base import EncodeContext, put_extra, without_internal
from .common import (
    LEGACY_FUNCTION,
    MAX_TOKENS_FIELD,
    PROTOCOL,
    REASONING_CONFIG,
    REASONING_EFFORT_RAW,
    THINKING_CONFIG,
)
from .decode import decode_message, decode_response_format, decode_tool, normalise_effort
from .encode import encode_messages, encode_response_format, encode_tool

_REQUEST_KEYS = frozenset(
    {
        "model",
        "messages",
        "stream",
        "temperature",
        "top_p",
        "max_completion_tokens",
        "max_tokens",
        "reasoning_effort",
        "reasoning",
        "thinking",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "stop",
        "verbosity",
        "response_format",
        "user",
        "functions",
        "function_call",
    }
)


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


def _check_envelope(body: Any) -> tuple[str, list[Any], bool | None]:
    """The fields without which there is no request: model, messages, n, stream."""
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
    return model, messages, stream


def _decode_sampling(body: dict[str, Any], req: Request, extra: dict[str, Any]) -> None:
    """temperature, top_p and the two max-tokens spellings (which one was used is kept)."""
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


def _decode_reasoning(body: dict[str, Any], req: Request, extra: dict[str, Any]) -> None:
    """Reasoning controls: reasoning_effort, OpenRouter ``reasoning`` object, DeepSeek ``thinking``."""
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


def _decode_tools(body: dict[str, Any], req: Request) -> None:
    """``tools`` and the deprecated ``functions`` (marked legacy for a same-Chat replay)."""
    tools = body.get("tools")
    if tools is not None:
        if not isinstance(tools, list):
            raise ProtocolError("'tools' must be an array", param="tools")
        req.tools = [decode_tool(t, f"tools[{i}]") for i, t in enumerate(tools)]
    functions = body.get("functions")
    if functions is not None:
        if not isinstance(functions, list):
            raise ProtocolError("'functions' must be an array", param="functions")
        legacy = []
        for i, fn in enumerate(functions):
            tool = decode_tool({"type": "function", "function": fn}, f"functions[{i}]")
            tool.extra[LEGACY_FUNCTION] = True
            legacy.append(tool)
        req.tools = (req.tools or []) + legacy


def _decode_tool_choice(body: dict[str, Any], req: Request, extra: dict[str, Any]) -> None:
    """``tool_choice``, the deprecated ``function_call`` and ``parallel_tool_calls``."""
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


def _decode_output_controls(body: dict[str, Any], req: Request) -> None:
    """stop, verbosity, response_format and user."""
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


def decode_request(body: dict) -> Request:
    """Client Chat Completions body -> Request. Raises ProtocolError naming the bad field.

    The steps run in a fixed order, so the first bad field reported is always the same one."""
    model, messages, stream = _check_envelope(body)
    extra = accept_extra(body, _REQUEST_KEYS)
    # known keys sent as explicit null stay null on a same-Chat hop
    for key in _REQUEST_KEYS:
        if key in body and body[key] is None and key not in ("model", "messages"):
            extra[key] = None
    req = Request(model=model, stream=stream, extra=extra)
    _decode_sampling(body, req, extra)
    _decode_reasoning(body, req, extra)
    _decode_tools(body, req)
    _decode_tool_choice(body, req, extra)
    _decode_output_controls(body, req)
    call_types: dict[str, str] = {}
    out: list[Node] = []
    for i, msg in enumerate(messages):
        decode_message(msg, f"messages[{i}]", call_types, out)
    req.input = out
    return req


# -- request ------------------------------------------------------------------------------

_effort_of = normalise_effort


def _encode_reasoning(req: Request, body: dict[str, Any], model: str, same: bool) -> None:
    """reasoning_effort / OpenRouter ``reasoning`` / DeepSeek ``thinking`` (reference RC4, DC5c).

    Effort ``none`` is omitted cross-protocol (many Chat upstreams reject it); a same-Chat hop
    replays the client's exact string."""
    r = req.reasoning
    if r is None:
        return
    effort = r.effort
    raw_effort = r.extra.get(REASONING_EFFORT_RAW) if same else None
    cfg = r.extra.get(REASONING_CONFIG)
    deepseek = "deepseek" in model.lower()
    if isinstance(cfg, dict):
        obj = without_internal(cfg)
        if (
            effort is not None
            and _effort_of(obj.get("effort")) != effort
            and not (effort == "none" and obj.get("enabled") is False)
        ):
            obj["effort"] = effort
            obj.pop("max_tokens", None)
        body["reasoning"] = obj
        if raw_effort is not None and _effort_of(raw_effort) == effort:
            body["reasoning_effort"] = raw_effort
    elif raw_effort is not None and _effort_of(raw_effort) == effort:
        body["reasoning_effort"] = raw_effort
    elif effort is not None and effort != "none":
        body["reasoning_effort"] = "xhigh" if effort == "max" and not deepseek else effort
    thinking = r.extra.get(THINKING_CONFIG)
    if isinstance(thinking, dict):
        body["thinking"] = without_internal(thinking)
    elif deepseek and effort is not None:
        if effort == "none":
            body["thinking"] = {"type": "disabled"}
            body.pop("reasoning_effort", None)
        else:
            body["thinking"] = {"type": "enabled"}
            body["reasoning_effort"] = "max" if effort in ("xhigh", "max") else "high"


def encode_request(req: Request, ctx: EncodeContext) -> dict:
    """Request -> upstream Chat Completions body. ``stream=true`` forces
    ``stream_options.include_usage=true`` (usage must always be billable); ``stream_options`` is
    dropped on non-stream requests because OpenAI rejects it there."""
    same = ctx.source_protocol in (None, PROTOCOL)
    model = ctx.model
    body: dict[str, Any] = {"model": model, "messages": encode_messages(req.input, same)}
    if req.stream is not None:
        body["stream"] = req.stream
    if req.temperature is not None:
        body["temperature"] = req.temperature
    if req.top_p is not None:
        body["top_p"] = req.top_p
    if req.max_output_tokens is not None:
        use_max_tokens = (
            same and req.extra.get(MAX_TOKENS_FIELD) == "max_tokens"
        ) or "deepseek" in model.lower()
        body["max_tokens" if use_max_tokens else "max_completion_tokens"] = req.max_output_tokens
    _encode_reasoning(req, body, model, same)
    if req.tools is not None:
        legacy = [t for t in req.tools if same and t.extra.get(LEGACY_FUNCTION)]
        tools = [
            e
            for e in (encode_tool(t) for t in req.tools if not (same and t.extra.get(LEGACY_FUNCTION)))
            if e is not None
        ]
        if tools or (same and not req.tools):
            body["tools"] = tools
        if legacy:
            body["functions"] = [e["function"] for e in (encode_tool(t) for t in legacy) if e is not None]
    if req.tool_choice is not None:
        choice = req.tool_choice if isinstance(req.tool_choice, str) else without_internal(req.tool_choice)
        if same and req.extra.get(LEGACY_FUNCTION) and "functions" in body:
            if isinstance(choice, dict):
                choice = {"name": (choice.get("function") or {}).get("name")}
            body["function_call"] = choice
        elif "tools" in body:
            body["tool_choice"] = choice
    if req.parallel_tool_calls is not None:
        body["parallel_tool_calls"] = req.parallel_tool_calls
    if req.stop is not None:
        body["stop"] = req.stop
    if req.verbosity is not None:
        body["verbosity"] = req.verbosity
    if req.response_format is not None:
        body["response_format"] = encode_response_format(req.response_format)
    if req.user is not None:
        body["user"] = req.user
    put_extra(body, req.extra)
    if req.stream:
        so = body.get("stream_options")
        so = dict(so) if isinstance(so, dict) else {}
        so["include_usage"] = True
        body["stream_options"] = so
    else:
        body.pop("stream_options", None)
    return body
