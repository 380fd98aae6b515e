"""Anthropic Messages request bodies: client wire -> Request, and Request -> upstream wire.

``system`` + ``messages[]`` content blocks <-> flat URP nodes; tools, tool choice,
thinking/output_config (rules in ``thinking``), sampling and metadata controls.
"""

from __future__ import annotations

from typing import Any

from gateway.errors import ProtocolError
from gateway.urp import (
    EnvelopeExtraNode,
    FileNode,
    ImageNode,
    Node,
    ProviderItemNode,
    ReasoningConfig,
    Request,
    ResponseFormat,
    TextNode,
    ToolDef,
    ToolResultNode,
)
from gateway.urp.nodes import INTERNAL_PREFIX

from ..base import EncodeContext, put_extra
from . import thinking as thinking_rules
from .common import (
    DERIVED_EFFORT,
    PROTOCOL,
    RAW_OUTPUT_CONFIG,
    RAW_THINKING,
    RAW_TOOL_CHOICE,
    SHAPE,
    TOOL_TYPE,
    decode_block,
    encode_content_block,
    encode_tool_result,
    scrub,
    unknown,
)

DEFAULT_MAX_TOKENS = 64000


_TOP_KNOWN = frozenset(
    {
        "model",
        "messages",
        "system",
        "max_tokens",
        "stream",
        "temperature",
        "top_p",
        "stop_sequences",
        "metadata",
        "tools",
        "tool_choice",
        "thinking",
        "output_config",
        "parallel_tool_calls",
    }
)
_MESSAGE_KNOWN = frozenset({"role", "content"})
_FUNCTION_TOOL_KNOWN = frozenset({"type", "name", "description", "input_schema", "strict"})


def _number(body: dict[str, Any], key: str) -> float | None:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ProtocolError(f"{key} must be a number", param=key)
    return value


# -- request decode ----------------------------------------------------------------------------


def _decode_system(system: Any, nodes: list[Node]) -> None:
    if system is None:
        return
    if isinstance(system, str):
        nodes.append(TextNode(role="system", content=system, extra={SHAPE: "string"}))
        return
    if not isinstance(system, list):
        raise ProtocolError("system must be a string or a list of text blocks", param="system")
    for i, block in enumerate(system):
        if not isinstance(block, dict):
            raise ProtocolError("system block must be an object", param=f"system[{i}]")
        if block.get("type") == "text":
            nodes.append(decode_block(block, "system", f"system[{i}]", in_tool_result=True))
        else:
            nodes.append(
                ProviderItemNode(
                    origin_protocol=PROTOCOL,
                    item_type=str(block.get("type")),
                    body=scrub(block),
                    role="system",
                )
            )


def _decode_messages(messages: Any, nodes: list[Node]) -> None:
    if not isinstance(messages, list):
        raise ProtocolError("messages must be a list", param="messages")
    append = nodes.append
    for i, msg in enumerate(messages):
        if not isinstance(msg, dict):
            raise ProtocolError("message must be an object", param=f"messages[{i}]")
        role = msg.get("role")
        if role not in ("user", "assistant"):
            raise ProtocolError("role must be 'user' or 'assistant'", param=f"messages[{i}].role")
        content = msg.get("content")
        start = len(nodes)
        if isinstance(content, str):
            append(TextNode(role=role, content=content, extra={SHAPE: "string"}))
        elif isinstance(content, list):
            for j, block in enumerate(content):  # the block's path is formatted only for an error
                append(decode_block(block, role, ("messages[{}].content[{}]", i, j)))
        else:
            raise ProtocolError(
                "content must be a string or a list of blocks", param=f"messages[{i}].content"
            )
        env = unknown(msg, _MESSAGE_KNOWN)
        if env and len(nodes) > start:
            nodes.insert(start, EnvelopeExtraNode(extra=env))


def _decode_tool(tool: Any, path: str) -> ToolDef:
    if not isinstance(tool, dict):
        raise ProtocolError("tool must be an object", param=path)
    ttype = tool.get("type")
    name = tool.get("name")
    if ttype is None or ttype == "custom":
        if not isinstance(name, str) or not name:
            raise ProtocolError("tool needs a string `name`", param=f"{path}.name")
        schema = tool.get("input_schema")
        if schema is not None and not isinstance(schema, dict):
            raise ProtocolError("input_schema must be an object", param=f"{path}.input_schema")
        desc = tool.get("description")
        if desc is not None and not isinstance(desc, str):
            raise ProtocolError("description must be a string", param=f"{path}.description")
        strict = tool.get("strict")
        extra = unknown(tool, _FUNCTION_TOOL_KNOWN)
        if ttype == "custom":
            extra[TOOL_TYPE] = "custom"
        return ToolDef(
            kind="function",
            name=name,
            description=desc,
            parameters=schema,
            strict=strict if isinstance(strict, bool) else None,
            extra=extra,
        )
    if not isinstance(ttype, str):
        raise ProtocolError("tool type must be a string", param=f"{path}.type")
    # Anthropic-native tool (bash_20250124, web_search_20250305, text_editor_*, mcp_toolset...):
    # its whole configuration rides in `extra` and is replayed only to a Messages upstream.
    return ToolDef(
        kind=ttype,
        name=name if isinstance(name, str) else None,
        origin_protocol=PROTOCOL,
        extra=unknown(tool, frozenset({"type", "name"})),
    )


def _choice_from_wire(choice: dict[str, Any], path: str = "tool_choice") -> str | dict[str, Any]:
    kind = choice.get("type")
    if kind == "auto":
        return "auto"
    if kind == "any":
        return "required"
    if kind == "none":
        return "none"
    if kind == "tool":
        name = choice.get("name")
        if not isinstance(name, str) or not name:
            raise ProtocolError("tool_choice of type 'tool' needs a `name`", param=f"{path}.name")
        return {"type": "function", "function": {"name": name}}
    raise ProtocolError("tool_choice.type must be auto, any, tool or none", param=f"{path}.type")


def _decode_sampling(body: dict[str, Any], req: Request) -> None:
    """stream, max_tokens, temperature, top_p, stop_sequences."""
    stream = body.get("stream")
    if stream is not None and not isinstance(stream, bool):
        raise ProtocolError("stream must be a boolean", param="stream")
    req.stream = stream
    max_tokens = body.get("max_tokens")
    if max_tokens is not None:
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise ProtocolError("max_tokens must be a positive integer", param="max_tokens")
        req.max_output_tokens = max_tokens
    req.temperature = _number(body, "temperature")
    req.top_p = _number(body, "top_p")

    stops = body.get("stop_sequences")
    if stops is not None:
        if not isinstance(stops, list) or not all(isinstance(s, str) for s in stops):
            raise ProtocolError("stop_sequences must be a list of strings", param="stop_sequences")
        req.stop = list(stops)


def _decode_metadata(body: dict[str, Any], req: Request, extra: dict[str, Any]) -> None:
    """``metadata.user_id`` becomes the end-user id; the rest of metadata rides in extra."""
    metadata = body.get("metadata")
    if metadata is not None:
        if not isinstance(metadata, dict):
            raise ProtocolError("metadata must be an object", param="metadata")
        user_id = metadata.get("user_id")
        if user_id is not None:
            if not isinstance(user_id, str):
                raise ProtocolError("metadata.user_id must be a string", param="metadata.user_id")
            req.user = user_id
        rest = {k: v for k, v in metadata.items() if k != "user_id" and not k.startswith(INTERNAL_PREFIX)}
        if rest or user_id is None:
            extra["metadata"] = rest


def _decode_tools(body: dict[str, Any], req: Request, extra: dict[str, Any]) -> None:
    """tools, tool_choice (its raw form kept for a same-family replay), parallel_tool_calls."""
    tools = body.get("tools")
    if tools is not None:
        if not isinstance(tools, list):
            raise ProtocolError("tools must be a list", param="tools")
        req.tools = [_decode_tool(t, f"tools[{i}]") for i, t in enumerate(tools)]

    choice = body.get("tool_choice")
    if choice is not None:
        if not isinstance(choice, dict):
            raise ProtocolError("tool_choice must be an object", param="tool_choice")
        req.tool_choice = _choice_from_wire(choice)
        extra[RAW_TOOL_CHOICE] = scrub(choice)
        if choice.get("disable_parallel_tool_use") is True:
            req.parallel_tool_calls = False
    ptc = body.get("parallel_tool_calls")
    if ptc is not None:
        if not isinstance(ptc, bool):
            raise ProtocolError("parallel_tool_calls must be a boolean", param="parallel_tool_calls")
        req.parallel_tool_calls = ptc


def _decode_thinking(body: dict[str, Any], req: Request, extra: dict[str, Any]) -> None:
    """thinking and output_config: the structured-output format and the derived effort."""
    thinking = body.get("thinking")
    if thinking is not None and not isinstance(thinking, dict):
        raise ProtocolError("thinking must be an object", param="thinking")
    output_config = body.get("output_config")
    if output_config is not None:
        if not isinstance(output_config, dict):
            raise ProtocolError("output_config must be an object", param="output_config")
        extra[RAW_OUTPUT_CONFIG] = scrub(output_config)
        fmt = output_config.get("format")
        if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
            schema = fmt.get("schema")
            if not isinstance(schema, dict):
                raise ProtocolError(
                    "output_config.format.schema must be an object", param="output_config.format.schema"
                )
            req.response_format = ResponseFormat(
                type="json_schema",
                name="response",
                schema=schema,
                extra=unknown(fmt, frozenset({"type", "schema"})),
            )
    effort = thinking_rules.derive_effort(thinking, output_config)
    if thinking is not None or effort is not None:
        rextra: dict[str, Any] = {DERIVED_EFFORT: effort}
        if thinking is not None:
            rextra[RAW_THINKING] = scrub(thinking)
        req.reasoning = ReasoningConfig(effort=effort, extra=rextra)


def decode_request(body: dict) -> Request:
    """A Messages request body -> Request. Raises ProtocolError naming the bad field.

    The steps run in a fixed order, so the first bad field reported is always the same one."""
    if not isinstance(body, dict):
        raise ProtocolError("request body must be a JSON object")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise ProtocolError("model must be a non-empty string", param="model")
    nodes: list[Node] = []
    _decode_system(body.get("system"), nodes)
    _decode_messages(body.get("messages"), nodes)
    req = Request(model=model, input=nodes)
    _decode_sampling(body, req)
    extra = unknown(body, _TOP_KNOWN)
    _decode_metadata(body, req, extra)
    _decode_tools(body, req, extra)
    _decode_thinking(body, req, extra)
    req.extra = extra
    return req


# -- request encode ----------------------------------------------------------------------------


def _node_role(node: Node) -> str:
    if isinstance(node, ToolResultNode):
        return "user"
    role = getattr(node, "role", "user")
    if role in ("system", "developer", "assistant"):
        return role
    return "user"


class _Grouper:
    """Groups flat nodes into alternating Anthropic messages. A control node closes the open
    message and its extras go onto the next message emitted."""

    __slots__ = ("messages", "role", "blocks", "env", "shape", "pending")

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        self.role: str | None = None
        self.blocks: list[dict[str, Any]] = []
        self.env: dict[str, Any] = {}
        self.shape: Any = None
        self.pending: dict[str, Any] = {}

    def flush(self) -> None:
        if self.blocks:
            blocks = self.blocks
            content: Any = blocks
            if (
                self.shape == "string"
                and len(blocks) == 1
                and blocks[0].get("type") == "text"
                and len(blocks[0]) == 2
            ):
                content = blocks[0]["text"]
            msg = {"role": self.role, "content": content}
            self.messages.append(put_extra(msg, self.env))
        self.role, self.blocks, self.env, self.shape = None, [], {}, None

    def add(self, role: str, block: dict[str, Any], node: Node, *, tool_result: bool = False) -> None:
        if self.role != role or (tool_result and any(b.get("type") != "tool_result" for b in self.blocks)):
            self.flush()
        if not self.blocks:
            self.role = role
            self.env, self.pending = self.pending, {}
            self.shape = node.extra.get(SHAPE)
        self.blocks.append(block)


def _encode_tools(tools: list[ToolDef], *, extras: bool) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for tool in tools:
        if tool.kind == "function" and tool.name:
            schema = tool.parameters if tool.parameters is not None else {"type": "object", "properties": {}}
            if "type" not in schema:
                schema = {"type": "object", **schema}
            desc: dict[str, Any] = {}
            if tool.extra.get(TOOL_TYPE) == "custom":
                desc["type"] = "custom"
            desc["name"] = tool.name
            if tool.description is not None:
                desc["description"] = tool.description
            desc["input_schema"] = schema
            if tool.strict is not None:
                desc["strict"] = tool.strict
            out.append(put_extra(desc, tool.extra) if extras else desc)
        elif tool.origin_protocol == PROTOCOL and tool.kind not in ("function", "custom", "namespace"):
            desc = {"type": tool.kind}
            if tool.name is not None:
                desc["name"] = tool.name
            out.append(put_extra(desc, scrub(tool.extra)))
    return out


def _encode_tool_choice(req: Request) -> dict[str, Any] | None:
    raw = req.extra.get(RAW_TOOL_CHOICE)
    choice = req.tool_choice
    no_parallel = req.parallel_tool_calls is False
    if isinstance(raw, dict):
        try:
            same = _choice_from_wire(raw) == choice
        except ProtocolError:
            same = False
        if same and (raw.get("disable_parallel_tool_use") is True) == no_parallel:
            return raw
    out: dict[str, Any] | None
    if choice is None:
        out = None
    elif choice == "auto":
        out = {"type": "auto"}
    elif choice == "required":
        out = {"type": "any"}
    elif choice == "none":
        out = {"type": "none"}
    elif isinstance(choice, dict) and choice.get("type") == "function":
        name = (choice.get("function") or {}).get("name")
        out = {"type": "tool", "name": name} if name else None
    elif isinstance(choice, dict) and choice.get("type") == "allowed_tools":
        mode = (choice.get("allowed_tools") or {}).get("mode")
        out = {"type": "any"} if mode == "required" else {"type": "auto"}
    else:
        out = None  # native/custom selectors have no Messages equivalent
    if no_parallel:
        if out is None:
            out = {"type": "auto"}
        if out["type"] != "none":
            out["disable_parallel_tool_use"] = True
    return out


def _encode_reasoning(req: Request, model: str, max_tokens: int, body: dict[str, Any]) -> None:
    """thinking + output_config. The client's own controls are re-emitted verbatim unless a
    transform changed the effort since decode; otherwise they are generated from the effort."""
    rc = req.reasoning
    raw_oc = req.extra.get(RAW_OUTPUT_CONFIG)
    oc: dict[str, Any] = dict(raw_oc) if isinstance(raw_oc, dict) else {}
    thinking: dict[str, Any] | None = None
    if rc is not None:
        raw_thinking = rc.extra.get(RAW_THINKING)
        native = RAW_THINKING in rc.extra or "effort" in oc
        if native and rc.effort == rc.extra.get(DERIVED_EFFORT):
            thinking = raw_thinking if isinstance(raw_thinking, dict) else None
        else:
            oc.pop("effort", None)
            thinking, gen_oc = thinking_rules.generate(rc.effort, model, max_tokens)
            if gen_oc:
                oc.update(gen_oc)
    rf = req.response_format
    raw_fmt = oc.pop("format", None)
    if rf is not None and rf.type == "json_schema" and rf.schema is not None:
        if isinstance(raw_fmt, dict) and raw_fmt.get("schema") == rf.schema:
            oc["format"] = raw_fmt
        else:
            oc["format"] = put_extra({"type": "json_schema", "schema": rf.schema}, rf.extra)
    if thinking is not None:
        body["thinking"] = thinking
    if oc or isinstance(raw_oc, dict):
        body["output_config"] = oc


def _encode_conversation(req: Request, same: bool) -> tuple[list[dict[str, Any]], Any, list[dict[str, Any]]]:
    """The nodes -> (system blocks, the system's original shape, grouped ``messages``)."""
    system: list[dict[str, Any]] = []
    system_shape: Any = None
    group = _Grouper()
    for node in req.input:
        if isinstance(node, EnvelopeExtraNode):
            group.flush()
            group.pending.update({k: v for k, v in node.extra.items() if not k.startswith(INTERNAL_PREFIX)})
            continue
        if isinstance(node, ToolResultNode):
            block = encode_tool_result(node, extras=True, same_family=same)
            if block is not None:
                group.add("user", block, node, tool_result=True)
            continue
        role = _node_role(node)
        if role in ("system", "developer"):
            if isinstance(node, TextNode) and node.content:
                if not system:
                    system_shape = node.extra.get(SHAPE)
                system.append(put_extra({"type": "text", "text": node.content}, node.extra))
            elif isinstance(node, ProviderItemNode) and node.origin_protocol == PROTOCOL:
                system.append(scrub(node.body))
            continue
        if role == "assistant" and not same and isinstance(node, ImageNode | FileNode):
            continue  # Anthropic accepts media only from the user (e.g. a Responses image_generation output)
        block = encode_content_block(node, extras=True, same_family=same)
        if block is not None:
            group.add(role, block, node)
    group.flush()
    return system, system_shape, group.messages


def _encode_metadata(req: Request, same: bool, body: dict[str, Any]) -> None:
    """``metadata``: the end-user id plus, on a same-family hop, the client's other metadata."""
    metadata: dict[str, Any] = {}
    raw_meta = req.extra.get("metadata")
    if same and isinstance(raw_meta, dict):
        metadata.update(raw_meta)
    if req.user is not None:
        metadata["user_id"] = req.user
    if metadata or (same and isinstance(raw_meta, dict)):
        body["metadata"] = metadata


def encode_request(req: Request, ctx: EncodeContext) -> dict:
    """Request -> Messages upstream body. Raises ProtocolError (400) when the thinking controls
    break Anthropic's documented rules."""
    same = ctx.source_protocol == PROTOCOL
    tool_extras = same or not ctx.strip_nested
    system, system_shape, messages = _encode_conversation(req, same)

    max_tokens = req.max_output_tokens if req.max_output_tokens is not None else DEFAULT_MAX_TOKENS
    body: dict[str, Any] = {"model": ctx.model, "max_tokens": max_tokens}
    if system:
        if system_shape == "string" and len(system) == 1 and len(system[0]) == 2:
            body["system"] = system[0]["text"]
        else:
            body["system"] = system
    body["messages"] = messages
    tools = _encode_tools(req.tools, extras=tool_extras) if req.tools else []
    if tools:
        body["tools"] = tools
    choice = _encode_tool_choice(req)
    if choice is not None and tools:
        body["tool_choice"] = choice
    _encode_reasoning(req, ctx.model, max_tokens, body)
    _encode_metadata(req, same, body)
    if req.stop is not None:
        body["stop_sequences"] = [req.stop] if isinstance(req.stop, str) else list(req.stop)
    if req.temperature is not None:
        body["temperature"] = req.temperature
    if req.top_p is not None:
        body["top_p"] = req.top_p
    if req.stream is not None:
        body["stream"] = req.stream
    for key, value in req.extra.items():
        if key not in body and key != "metadata" and not key.startswith(INTERNAL_PREFIX):
            body[key] = value
    thinking_rules.validate(body)
    return body
