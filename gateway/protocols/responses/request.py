"""OpenAI Responses request body <-> ``urp.Request``.

Deliberate choices (the reference implementation differs):

- ``reasoning.effort: "none"`` is forwarded as is. The reference omits it, which silently gives
  the model its default reasoning effort; a client that asked for none expects none.
- ``include: ["reasoning.encrypted_content"]`` is not appended automatically (some
  Responses-compatible upstreams reject unknown include values); set
  ``ctx.options["responses_include_encrypted"] = True`` to append it.
- A leading system/developer message is promoted to ``instructions`` only on cross-protocol
  hops; a same-protocol hop keeps the client's exact layout.
"""

from __future__ import annotations

from typing import Any

from gateway.errors import ProtocolError
from gateway.urp.nodes import INTERNAL_PREFIX, Node, TextNode, wire_extra
from gateway.urp.request import REASONING_EFFORTS, ReasoningConfig, Request, ResponseFormat, ToolDef

from ..base import EncodeContext, without_internal
from .common import (
    M_INSTR,
    PROTOCOL,
    decode_items,
    unknown_fields,
)
from .encode import encode_items

# Request.extra markers
X_INSTRUCTIONS = "_gw_rsp_instructions"  # raw ``instructions`` value
X_INSTR_PRINT = "_gw_rsp_instr_print"  # fingerprint of the instruction nodes at decode time
X_INPUT_STRING = "_gw_rsp_input_string"  # ``input`` was a plain string
X_NO_INPUT = "_gw_rsp_no_input"  # ``input`` was absent

_TYPED = frozenset(
    {
        "model",
        "input",
        "instructions",
        "stream",
        "temperature",
        "top_p",
        "max_output_tokens",
        "reasoning",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "text",
        "response_format",
        "user",
    }
)
_FUNCTION_TOOL_KEYS = frozenset({"type", "name", "description", "parameters", "strict"})
_CUSTOM_TOOL_KEYS = frozenset({"type", "name", "description", "format"})
_NAMESPACE_KEYS = frozenset({"type", "name", "description", "tools"})
_NATIVE_KEYS = frozenset({"type", "name", "description"})
_FORMAT_KEYS = frozenset({"type", "name", "description", "schema", "strict"})
_UPSTREAM_PHASES = frozenset({"commentary", "final_answer"})
_EFFORT_ALIASES = {"minimum": "minimal"}


# --------------------------------------------------------------------------------------------
# decode
# --------------------------------------------------------------------------------------------


def _fingerprint(nodes: list[Node]) -> list[tuple]:
    return [
        (n.type, getattr(n, "role", None), getattr(n, "content", None) if isinstance(n, TextNode) else None)
        for n in nodes
    ]


def _decode_tool(tool: Any, path: str) -> ToolDef:
    if not isinstance(tool, dict):
        raise ProtocolError("tool must be an object", param=path)
    kind = tool.get("type")
    if not isinstance(kind, str):
        raise ProtocolError("tool 'type' must be a string", param=f"{path}.type")
    name = tool.get("name")
    desc = tool.get("description")
    if name is not None and not isinstance(name, str):
        raise ProtocolError("tool 'name' must be a string", param=f"{path}.name")
    if desc is not None and not isinstance(desc, str):
        raise ProtocolError("tool 'description' must be a string", param=f"{path}.description")
    if kind in ("function", "custom", "namespace") and not name:
        raise ProtocolError(f"{kind} tool needs a 'name'", param=f"{path}.name")
    if kind == "function":
        params = tool.get("parameters")
        if params is not None and not isinstance(params, dict):
            raise ProtocolError("'parameters' must be an object", param=f"{path}.parameters")
        strict = tool.get("strict")
        if strict is not None and not isinstance(strict, bool):
            raise ProtocolError("'strict' must be a boolean", param=f"{path}.strict")
        return ToolDef(
            kind="function",
            name=name,
            description=desc,
            parameters=params,
            strict=strict,
            extra=unknown_fields(tool, _FUNCTION_TOOL_KEYS),
        )
    if kind == "custom":
        fmt = tool.get("format")
        if fmt is not None and not isinstance(fmt, dict):
            raise ProtocolError("'format' must be an object", param=f"{path}.format")
        return ToolDef(
            kind="custom",
            name=name,
            description=desc,
            format=fmt,
            extra=unknown_fields(tool, _CUSTOM_TOOL_KEYS),
        )
    if kind == "namespace":
        members = tool.get("tools")
        if not isinstance(members, list):
            raise ProtocolError("namespace 'tools' must be an array", param=f"{path}.tools")
        return ToolDef(
            kind="namespace",
            name=name,
            description=desc,
            origin_protocol=PROTOCOL,
            tools=[_decode_tool(m, f"{path}.tools[{i}]") for i, m in enumerate(members)],
            extra=unknown_fields(tool, _NAMESPACE_KEYS),
        )
    return ToolDef(
        kind=kind,
        name=name,
        description=desc,
        origin_protocol=PROTOCOL,
        extra=without_internal(unknown_fields(tool, _NATIVE_KEYS)),
    )


def decode_tool_choice(choice: Any, path: str) -> str | dict[str, Any]:
    """Flat Responses selector -> canonical (Chat-style nested) selector."""
    if isinstance(choice, str):
        return choice
    if not isinstance(choice, dict):
        raise ProtocolError("'tool_choice' must be a string or an object", param=path)
    kind = choice.get("type")
    if kind in ("function", "custom"):
        if not isinstance(choice.get("name"), str):
            raise ProtocolError("tool_choice needs a 'name'", param=f"{path}.name")
        return {
            "type": kind,
            kind: {
                k: without_internal(v)
                for k, v in choice.items()
                if k != "type" and not k.startswith(INTERNAL_PREFIX)
            },
        }
    if kind == "allowed_tools":
        tools = choice.get("tools")
        if not isinstance(tools, list):
            raise ProtocolError("allowed_tools needs a 'tools' array", param=f"{path}.tools")
        inner: dict[str, Any] = {}
        for k, v in choice.items():
            if k == "type" or k.startswith(INTERNAL_PREFIX):
                continue
            inner[k] = (
                [decode_tool_choice(t, f"{path}.tools[{i}]") for i, t in enumerate(tools)]
                if k == "tools"
                else v
            )
        return {"type": "allowed_tools", "allowed_tools": inner}
    if not isinstance(kind, str):
        raise ProtocolError("tool_choice 'type' must be a string", param=f"{path}.type")
    return without_internal(choice)


def _decode_reasoning(raw: Any) -> ReasoningConfig:
    if not isinstance(raw, dict):
        raise ProtocolError("'reasoning' must be an object", param="reasoning")
    cfg = ReasoningConfig(
        extra={k: v for k, v in raw.items() if k != "effort" and not k.startswith(INTERNAL_PREFIX)}
    )
    effort = raw.get("effort")
    if isinstance(effort, str):
        norm = _EFFORT_ALIASES.get(effort.lower(), effort.lower())
        if norm in REASONING_EFFORTS:
            cfg.effort = norm
        else:
            cfg.extra["effort"] = effort  # unknown value: let a same-protocol upstream judge it
    elif effort is not None:
        raise ProtocolError("'reasoning.effort' must be a string", param="reasoning.effort")
    elif "effort" in raw:
        cfg.extra["effort"] = None
    return cfg


def _decode_format(fmt: Any, path: str) -> ResponseFormat:
    if not isinstance(fmt, dict) or not isinstance(fmt.get("type"), str):
        raise ProtocolError("format must be an object with a 'type'", param=path)
    if fmt.get("type") == "json_schema" and isinstance(fmt.get("json_schema"), dict):
        # Chat-style alias ({"type":"json_schema","json_schema":{name, schema...}})
        fmt = {"type": "json_schema", **fmt["json_schema"]}
    schema = fmt.get("schema")
    if schema is not None and not isinstance(schema, dict):
        raise ProtocolError("'schema' must be an object", param=f"{path}.schema")
    return ResponseFormat(
        type=fmt["type"],
        name=fmt.get("name"),
        description=fmt.get("description"),
        schema=schema,
        strict=fmt.get("strict"),
        extra=unknown_fields(fmt, _FORMAT_KEYS),
    )


def _check(body: dict[str, Any], key: str, types: tuple[type, ...], what: str) -> Any:
    v = body.get(key)
    if v is None:
        return None
    if not isinstance(v, types) or (bool not in types and isinstance(v, bool)):
        raise ProtocolError(f"'{key}' must be {what}", param=key)
    return v


def _decode_conversation(body: dict[str, Any], extra: dict[str, Any]) -> list[Node]:
    """``instructions`` (developer nodes marked as instructions) then ``input``; their original
    shapes ride in extra so a same-protocol hop writes them back as sent."""
    nodes: list[Node] = []
    instructions = body.get("instructions")
    if isinstance(instructions, str):
        nodes.append(TextNode(role="developer", content=instructions, extra={M_INSTR: True}))
    elif isinstance(instructions, list):
        nodes = decode_items(instructions, "instructions", "developer")
        for n in nodes:
            n.extra[M_INSTR] = True
    elif instructions is not None:
        raise ProtocolError("'instructions' must be a string or an array", param="instructions")
    if instructions is not None:
        extra[X_INSTRUCTIONS] = instructions
        extra[X_INSTR_PRINT] = _fingerprint(nodes)

    inp = body.get("input")
    if isinstance(inp, str):
        nodes.append(TextNode(role="user", content=inp))
        extra[X_INPUT_STRING] = True
    elif isinstance(inp, list):
        nodes.extend(decode_items(inp, "input", "user"))
    elif isinstance(inp, dict):
        nodes.extend(decode_items([inp], "input", "user"))
    elif inp is None:
        if "input" not in body:
            extra[X_NO_INPUT] = True
    else:
        raise ProtocolError("'input' must be a string or an array", param="input")
    return nodes


def _decode_text(body: dict[str, Any], req: Request, extra: dict[str, Any]) -> None:
    """``text``: its ``format`` (structured output) and ``verbosity``; other keys ride in extra."""
    text = body.get("text")
    if text is not None:
        if not isinstance(text, dict):
            raise ProtocolError("'text' must be an object", param="text")
        extra["text"] = {
            k: v
            for k, v in text.items()
            if k not in ("format", "verbosity") and not k.startswith(INTERNAL_PREFIX)
        }
        if text.get("format") is not None:
            req.response_format = _decode_format(text["format"], "text.format")
        elif "format" in text:
            extra["text"]["format"] = None
        verbosity = text.get("verbosity")
        if isinstance(verbosity, str):
            req.verbosity = verbosity
        elif verbosity is not None:
            raise ProtocolError("'text.verbosity' must be a string", param="text.verbosity")
        elif "verbosity" in text:
            extra["text"]["verbosity"] = None


def decode_request(body: dict) -> Request:
    """Decode a client's ``POST /v1/responses`` body."""
    if not isinstance(body, dict):
        raise ProtocolError("request body must be a JSON object")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise ProtocolError("'model' is required and must be a string", param="model")
    if body.get("background") is True:
        raise ProtocolError(
            "background responses are not supported by this gateway",
            param="background",
            code="background_not_supported",
        )
    req = Request(model=model)
    extra = req.extra
    for k, v in body.items():
        if k.startswith(INTERNAL_PREFIX):
            continue
        if k not in _TYPED or (v is None and k != "model"):
            extra[k] = v

    req.stream = _check(body, "stream", (bool,), "a boolean")
    req.temperature = _check(body, "temperature", (int, float), "a number")
    req.top_p = _check(body, "top_p", (int, float), "a number")
    req.max_output_tokens = _check(body, "max_output_tokens", (int,), "an integer")
    req.parallel_tool_calls = _check(body, "parallel_tool_calls", (bool,), "a boolean")
    req.user = _check(body, "user", (str,), "a string")

    req.input = _decode_conversation(body, extra)

    tools = body.get("tools")
    if tools is not None:
        if not isinstance(tools, list):
            raise ProtocolError("'tools' must be an array", param="tools")
        req.tools = [_decode_tool(t, f"tools[{i}]") for i, t in enumerate(tools)]
    if body.get("tool_choice") is not None:
        req.tool_choice = decode_tool_choice(body["tool_choice"], "tool_choice")
    if body.get("reasoning") is not None:
        req.reasoning = _decode_reasoning(body["reasoning"])

    _decode_text(body, req, extra)
    if req.response_format is None and isinstance(body.get("response_format"), dict):
        req.response_format = _decode_format(body["response_format"], "response_format")
    return req


# --------------------------------------------------------------------------------------------
# encode
# --------------------------------------------------------------------------------------------


def encode_tool(tool: ToolDef, same: bool) -> dict[str, Any] | None:
    kind = tool.kind
    if kind == "function":
        out: dict[str, Any] = {"type": "function", "name": tool.name}
        if tool.description is not None:
            out["description"] = tool.description
        if tool.parameters is not None:
            out["parameters"] = tool.parameters
        if tool.strict is not None:
            out["strict"] = tool.strict
        elif not same:
            # Chat and Messages tools are non-strict unless asked; Responses would otherwise try
            # strict validation on its own, changing what the client's schema means.
            out["strict"] = False
    elif kind == "custom":
        out = {"type": "custom", "name": tool.name}
        if tool.description is not None:
            out["description"] = tool.description
        if tool.format is not None:
            out["format"] = tool.format
    elif kind == "namespace":
        members = [m for m in (encode_tool(t, same) for t in tool.tools or ()) if m is not None]
        out = {
            "type": "namespace",
            "name": tool.name,
            "description": tool.description or "",
            "tools": members,
        }
    elif tool.origin_protocol in (None, PROTOCOL):
        out = {"type": kind}
        if tool.name is not None:
            out["name"] = tool.name
        if tool.description is not None:
            out["description"] = tool.description
        for k, v in tool.extra.items():
            if k not in out and not k.startswith(INTERNAL_PREFIX):
                out[k] = without_internal(v)
        return out
    else:
        return None  # another family's native tool
    if same or kind == "namespace":
        for k, v in tool.extra.items():
            if k not in out and not k.startswith(INTERNAL_PREFIX):
                out[k] = v
    return out


def encode_tool_choice(choice: str | dict[str, Any]) -> str | dict[str, Any]:
    """Canonical selector -> flat Responses selector."""
    if isinstance(choice, str):
        return choice
    kind = choice.get("type")
    if kind in ("function", "custom") and isinstance(choice.get(kind), dict):
        out: dict[str, Any] = {"type": kind}
        out.update(wire_extra(choice[kind]))
        return out
    if kind == "allowed_tools" and isinstance(choice.get("allowed_tools"), dict):
        out = {"type": "allowed_tools"}
        for k, v in choice["allowed_tools"].items():
            if k.startswith(INTERNAL_PREFIX):
                continue
            out[k] = [encode_tool_choice(t) for t in v] if k == "tools" and isinstance(v, list) else v
        return out
    return without_internal(choice)


def _encode_format(fmt: ResponseFormat, same: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"type": fmt.type}
    if fmt.type == "json_schema":
        out["name"] = fmt.name or "response"
        if fmt.description is not None:
            out["description"] = fmt.description
        out["schema"] = fmt.schema if fmt.schema is not None else {}
        if fmt.strict is not None:
            out["strict"] = fmt.strict
    if same:
        for k, v in fmt.extra.items():
            if k not in out and not k.startswith(INTERNAL_PREFIX):
                out[k] = v
    return out


def _instructions(instr: list[Node], req: Request, same: bool) -> Any:
    raw = req.extra.get(X_INSTRUCTIONS)
    if same and raw is not None and req.extra.get(X_INSTR_PRINT) == _fingerprint(instr):
        return raw
    if all(type(n) is TextNode and not wire_extra(n.extra) for n in instr) and not isinstance(raw, list):
        return "\n\n".join(n.content for n in instr)
    return encode_items(instr, same=same, output=False)


def _encode_conversation(req: Request, same: bool, body: dict[str, Any]) -> None:
    """``instructions`` and ``input``. Cross-protocol, a leading run of plain system/developer
    text becomes ``instructions``; same-protocol, the client's original shapes come back."""
    instr = [n for n in req.input if M_INSTR in n.extra]
    rest = [n for n in req.input if M_INSTR not in n.extra] if instr else req.input
    if instr:
        body["instructions"] = _instructions(instr, req, same)
    elif not same and rest and type(rest[0]) is TextNode and rest[0].role in ("system", "developer"):
        # Promote the leading system/developer text to ``instructions`` (plain-text only).
        role, k = rest[0].role, 0
        while k < len(rest) and type(rest[k]) is TextNode and rest[k].role == role:
            k += 1
        body["instructions"] = "\n\n".join(n.content for n in rest[:k])
        rest = rest[k:]

    if (
        same
        and req.extra.get(X_INPUT_STRING)
        and len(rest) == 1
        and type(rest[0]) is TextNode
        and rest[0].role == "user"
        and rest[0].phase is None
        and not wire_extra(rest[0].extra)
    ):
        body["input"] = rest[0].content
    elif rest or not (same and req.extra.get(X_NO_INPUT)):
        body["input"] = encode_items(rest, same=same, output=False, phases=None if same else _UPSTREAM_PHASES)


def _encode_reasoning(req: Request, same: bool, body: dict[str, Any]) -> None:
    """``reasoning``: effort (``max`` is ``xhigh`` on OpenAI) plus, same-protocol, the raw object."""
    if req.reasoning is None:
        return
    r: dict[str, Any] = {}
    if same:
        r.update(wire_extra(req.reasoning.extra))
    if req.reasoning.effort is not None:
        r["effort"] = req.reasoning.effort if same or req.reasoning.effort != "max" else "xhigh"
    if r or same:
        body["reasoning"] = r


def encode_request(req: Request, ctx: EncodeContext) -> dict:
    """The upstream ``POST /v1/responses`` body."""
    same = ctx.source_protocol == PROTOCOL
    body: dict[str, Any] = {"model": ctx.model}
    for k, v in req.extra.items():
        if not k.startswith(INTERNAL_PREFIX):
            body[k] = v

    _encode_conversation(req, same, body)

    if req.tools is not None:
        body["tools"] = [t for t in (encode_tool(t, same) for t in req.tools) if t is not None]
    if req.tool_choice is not None:
        body["tool_choice"] = encode_tool_choice(req.tool_choice)
    _encode_reasoning(req, same, body)
    if ctx.options.get("responses_include_encrypted"):
        include = list(body.get("include") or [])
        if "reasoning.encrypted_content" not in include:
            include.append("reasoning.encrypted_content")
        body["include"] = include

    raw_text = body.get("text")
    if req.response_format is not None or req.verbosity is not None or isinstance(raw_text, dict):
        text = dict(raw_text) if isinstance(raw_text, dict) else {}
        if req.response_format is not None:
            text["format"] = _encode_format(req.response_format, same)
        if req.verbosity is not None:
            text["verbosity"] = req.verbosity
        body["text"] = text

    if req.max_output_tokens is not None:
        body["max_output_tokens"] = req.max_output_tokens
    if req.temperature is not None:
        body["temperature"] = req.temperature
    if req.top_p is not None:
        body["top_p"] = req.top_p
    if req.parallel_tool_calls is not None:
        body["parallel_tool_calls"] = req.parallel_tool_calls
    if req.user is not None:
        body["user"] = req.user
    if req.stream is not None:
        body["stream"] = req.stream
    return body
