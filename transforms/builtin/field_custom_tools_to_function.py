"""``field_custom_tools_to_function``: offer freeform (custom) tools to upstreams that only take
JSON function tools, and turn the calls back into custom calls on the way out.

Configure two rules with the same models and config, one ``request`` and one ``response``.

Request rule
    Every selected custom tool (``names`` lists exact names, ``"*"`` selects every custom tool,
    ``[]`` turns the rule off), also the custom members of a ``namespace`` tool, becomes a JSON
    function tool with one required string parameter ``input`` that carries the raw custom input,
    kept whole even when it is JSON itself. Only ``apply_patch`` gets the patch-format
    instructions; other tools get a generic string-input schema. Grammar constraints (Lark or any
    other ``format``) cannot be expressed and are dropped. History calls of selected custom tools
    become function calls with ``{"input": <raw>}`` arguments, their results become function
    results, and both drop their optional item id (a custom item id is not a valid function item
    id) while ``call_id`` stays. ``tool_choice`` selectors, including those inside
    ``allowed_tools``, are rewritten when they name a converted tool by its identity (namespace
    and name), not merely a configured name. Plain function tools are never converted, even with
    ``"*"``. A declared function tool with the same namespace and name as a custom tool being
    converted makes the request ambiguous: it is rejected before forwarding (400 in the client's
    shape; the reference answered 500).

Response rule
    Restores only the calls converted in this upstream attempt (the request rule leaves a
    :class:`ConversionRecord` in ``ctx.shared``; alone, the response rule converts nothing). A
    function call is restored when its call id was converted, or its namespace and name identify
    a converted tool; an omitted namespace is restored only when the name identifies exactly one
    tool in the request. The arguments are unwrapped (``input``; also ``patch``/``command``/
    ``content`` holding a patch; a whole-argument JSON string is decoded) and ``apply_patch``
    text is normalised (see ``field_custom_tools_patch``). A restored call's item id becomes a
    custom-call id (``fc_x`` -> ``ctc_x``).

Streaming
    A converted call's argument fragments are buffered until the call completes; then the whole
    custom input is emitted as one delta, so no JSON escape or wrapper fragment ever reaches the
    client however the upstream split them. A function-call start without a name (some upstreams
    send it late) is held with its deltas until the call or the response completes, then either
    restored or replayed unchanged. Text and reasoning keep streaming. Deltas carrying event
    extras (usage, metadata) are kept with empty arguments. ``NodeDone.node`` and
    ``ResponseDone.output`` carry the restored calls. On a stream error the buffers are dropped
    and nothing after the error is emitted.

Deliberate choices:
- A function call in the *history* with the same name as a converted custom tool is not a
  conflict (only declared function tools are): it is left alone, and only the declared tools
  decide what a new call is restored to.
- History custom calls of a selected name are converted even when the tool is not declared in
  this request (the upstream would reject a custom item anyway); their call ids are recorded,
  but their names do not make later function calls custom.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import orjson

from gateway.urp import Request, Response, ToolCallNode, ToolDef, ToolResultNode
from gateway.urp import events as ev
from gateway.urp.events import Event, NodeDelta, NodeDone, NodeStart, ResponseDone, StreamError
from transforms.base import ALL_SCOPES, Transform, TransformContext, TransformExample, TransformRejected
from transforms.lib.field_custom_tools_patch import normalize_patch

TYPE_ID = "field_custom_tools_to_function"
APPLY_PATCH = "apply_patch"

Identity = tuple[str | None, str]  # (namespace, name)

APPLY_PATCH_USAGE = (
    "Pass the whole patch as the `input` string, from `*** Begin Patch` to `*** End Patch`. "
    "Change an existing file with `*** Update File: <path>` followed by `@@` hunks: unchanged context "
    "lines start with one space, lines starting with `-` are deleted and lines starting with `+` are "
    "inserted. Never list an unchanged line as both `-` and `+`: a hunk whose `-` and `+` lines are "
    "identical does nothing. Never rewrite an existing file with `*** Add File`; use it only for new "
    "files, prefixing every line with `+`. Remove a file with `*** Delete File: <path>`.\n"
    "Example:\n"
    "*** Begin Patch\n"
    "*** Update File: src/app.py\n"
    "@@ def greet():\n"
    '-    print("Hi")\n'
    '+    print("Hello")\n'
    "*** End Patch"
)
APPLY_PATCH_INPUT = (
    "The complete patch in the apply_patch format, as one string starting with `*** Begin Patch` and "
    "ending with `*** End Patch`."
)
GENERIC_INPUT = "The complete input for this tool, as one string, exactly as the tool expects it."


def input_schema(description: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"input": {"type": "string", "description": description}},
        "required": ["input"],
        "additionalProperties": False,
    }


@dataclass(slots=True)
class ConversionRecord:
    """What the request rule did in this upstream attempt; read by the response rule."""

    tools: set[Identity] = field(default_factory=set)  # converted tool definitions
    call_ids: dict[str, Identity] = field(default_factory=dict)  # converted history calls
    known: dict[str, set[str | None]] = field(default_factory=dict)  # name -> namespaces in the request

    @property
    def active(self) -> bool:
        return bool(self.tools or self.call_ids)

    def resolve(self, name: str, namespace: str | None, call_id: str | None) -> Identity | None:
        """The converted identity a function call belongs to, or None for a plain function."""
        if call_id and call_id in self.call_ids:
            ident = self.call_ids[call_id]
            if ident[1] == name and (namespace is None or namespace == ident[0]):
                return ident
        if namespace is not None:
            ident = (namespace, name)
            return ident if ident in self.tools else None
        # The upstream omitted the namespace: restore only when the bare name identifies exactly
        # one tool of the request (seed: otherwise ambiguous, even when one of them is top-level).
        namespaces = self.known.get(name)
        if namespaces is not None and len(namespaces) == 1:
            ident = (next(iter(namespaces)), name)
            if ident in self.tools:
                return ident
        return None


def unwrap_arguments(arguments: str) -> str:
    """The custom input carried by function arguments (see the module docstring)."""
    trimmed = arguments.strip()
    if not trimmed or trimmed[0] not in '{"':
        return arguments
    try:
        value = orjson.loads(trimmed)
    except orjson.JSONDecodeError:
        return arguments
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        for key in ("input", "patch", "command", "content"):
            text = value.get(key)
            if isinstance(text, str) and (key == "input" or "Begin Patch" in text):
                return text
    return arguments


def custom_item_id(item_id: str | None) -> str | None:
    """The item id a restored custom call carries: the upstream's function-call id (``fc_...``)
    becomes a custom-call id (``ctc_...``, OpenAI's prefix), deterministically, so a stream's
    header and its finished node agree and a Responses client never sees a custom call with a
    function-style id."""
    if not item_id or item_id.startswith("ctc_"):
        return item_id
    head, sep, rest = item_id.partition("_")
    return "ctc_" + (rest if sep and head in ("fc", "call", "toolu") and rest else item_id)


def restore_call(node: ToolCallNode, ident: Identity, arguments: str | None = None) -> ToolCallNode:
    text = unwrap_arguments(node.arguments if arguments is None else arguments)
    if ident[1] == APPLY_PATCH:
        text = normalize_patch(text)
    return replace(
        node,
        id=custom_item_id(node.id),
        tool_type="custom",
        namespace=ident[0],
        arguments=text,
        extra=dict(node.extra),
    )


class FieldCustomToolsToFunction(Transform):
    type_id = TYPE_ID
    category = "field"
    name = {"en": "Field: custom tools to function", "zh": "字段：自定义工具转函数"}
    description = {
        "en": "Convert selected custom (freeform) tools to JSON function tools for upstreams without custom "
        "tools, and restore the converted calls in the response. Add a request rule and a response "
        "rule with the same models and config.",
        "zh": "将选定的 custom 工具转换为 JSON function，供不支持 custom 的上游使用，并在响应中恢复已转换的调用。"
        "请使用相同的模型筛选和配置添加 request 与 response 两条规则。",
    }
    phases = ("request", "response")
    scopes = ALL_SCOPES
    config_schema = {
        "type": "object",
        "properties": {
            "names": {
                "type": "array",
                "title": "Custom tool names",
                "description": 'Exact custom tool names to convert. "*" selects every custom tool; [] turns the '
                "conversion off. Function tools are never converted.",
                "items": {"type": "string", "minLength": 1},
                "default": [APPLY_PATCH],
            },
        },
    }

    examples = (
        TransformExample(
            title="A custom (freeform) tool and its history become a JSON function with one string input",
            phase="request",
            protocol="responses",
            config={"names": ["run_sql"]},
            input={
                "model": "grok-4",
                "input": [
                    {"type": "message", "role": "user", "content": "count users"},
                    {
                        "type": "custom_tool_call",
                        "call_id": "call_1",
                        "name": "run_sql",
                        "input": "SELECT count(*) FROM users",
                    },
                    {"type": "custom_tool_call_output", "call_id": "call_1", "output": "42"},
                ],
                "tools": [{"type": "custom", "name": "run_sql", "description": "Run one SQL query"}],
            },
            expected={
                "input": [
                    {"type": "message", "role": "user", "content": "count users"},
                    {
                        "type": "function_call",
                        "call_id": "call_1",
                        "name": "run_sql",
                        "arguments": '{"input":"SELECT count(*) FROM users"}',
                    },
                    {"type": "function_call_output", "call_id": "call_1", "output": "42"},
                ],
                "tools": [
                    {
                        "type": "function",
                        "name": "run_sql",
                        "description": "Run one SQL query",
                        "parameters": {
                            "type": "object",
                            "properties": {
                                "input": {
                                    "type": "string",
                                    "description": "The complete input for this tool, as one string, exactly as the tool expects it.",
                                }
                            },
                            "required": ["input"],
                            "additionalProperties": False,
                        },
                        "strict": False,
                    }
                ],
            },
            note={
                "en": "Add a response rule with the same config: it turns the upstream's function calls back into "
                "custom calls (and repairs apply_patch text); alone it converts nothing.",
                "zh": "请再添加一条配置相同的 response 规则：它把上游的函数调用还原为自定义工具调用（并修复 apply_patch 文本）；"
                "单独使用时不做任何转换。",
            },
        ),
    )

    def setup(self) -> None:
        names = list(self.config.get("names") or [])
        self.all = "*" in names
        self.names = frozenset(n for n in names if n and n != "*")
        self.enabled = self.all or bool(self.names)

    def selects(self, name: str | None) -> bool:
        return bool(name) and (self.all or name in self.names)

    # -- request -----------------------------------------------------------------------------
    def apply_request(self, req: Request, ctx: TransformContext) -> None:
        if not self.enabled:
            return
        record: ConversionRecord = ctx.shared.get(TYPE_ID) or ConversionRecord()
        selected: list[tuple[ToolDef, str | None]] = []
        native: set[Identity] = set()
        for tool, namespace in _walk_tools(req.tools):
            if not tool.name:
                continue
            record.known.setdefault(tool.name, set()).add(namespace)
            if tool.kind == "custom" and self.selects(tool.name):
                selected.append((tool, namespace))
            elif tool.kind == "function":
                native.add((namespace, tool.name))
        for tool, namespace in selected:
            if (namespace, tool.name) in native:
                qualified = f"{namespace}.{tool.name}" if namespace else tool.name
                raise TransformRejected(
                    f"The custom tool {qualified!r} cannot be converted to a function for this model: a function "
                    f"tool with the same name is also declared. Rename one of them.",
                    param="tools",
                )
        for tool, namespace in selected:
            _convert_tool(tool)
            record.tools.add((namespace, tool.name))
        converted_calls = False
        for i, node in enumerate(req.input):
            if isinstance(node, ToolCallNode) and node.tool_type == "custom" and self.selects(node.name):
                record.call_ids[node.call_id] = (node.namespace, node.name)
                req.input[i] = replace(
                    node,
                    tool_type="function",
                    id=None,
                    arguments=orjson.dumps({"input": node.arguments}).decode(),
                )
                converted_calls = True
        if converted_calls:
            for i, node in enumerate(req.input):
                if (
                    isinstance(node, ToolResultNode)
                    and node.tool_type == "custom"
                    and node.call_id in record.call_ids
                ):
                    req.input[i] = replace(node, tool_type="function", id=None)
        if isinstance(req.tool_choice, dict):
            req.tool_choice = self._convert_choice(req.tool_choice, record)
        if record.active:
            ctx.shared[TYPE_ID] = record

    def _convert_choice(self, choice: dict[str, Any], record: ConversionRecord) -> dict[str, Any]:
        """A custom selector becomes a function selector only when it names a tool this rule
        converted, by its identity (namespace and name): a configured name alone (a tool that is
        not declared, or a namespaced one selected by another namespace) is left alone."""
        kind = choice.get("type")
        if kind == "custom":
            inner = choice.get("custom")
            source = inner if isinstance(inner, dict) else choice
            name = source.get("name")
            namespace = source.get("namespace", choice.get("namespace"))
            if not isinstance(name, str) or not isinstance(namespace, str | None):
                return choice
            ident = record.resolve(name, namespace, None)
            if ident is None or ident not in record.tools:
                return choice
            return {
                ("function" if k == "custom" else k): ("function" if k == "type" else v)
                for k, v in choice.items()
            }
        if kind == "allowed_tools":
            out = dict(choice)
            if isinstance(out.get("tools"), list):
                out["tools"] = [
                    self._convert_choice(t, record) if isinstance(t, dict) else t for t in out["tools"]
                ]
            nested = out.get("allowed_tools")
            if isinstance(nested, dict) and isinstance(nested.get("tools"), list):
                out["allowed_tools"] = {
                    **nested,
                    "tools": [
                        self._convert_choice(t, record) if isinstance(t, dict) else t for t in nested["tools"]
                    ],
                }
            return out
        return choice

    # -- response ----------------------------------------------------------------------------
    def _record(self, ctx: TransformContext) -> ConversionRecord | None:
        if not self.enabled:
            return None
        record = ctx.shared.get(TYPE_ID)
        return record if record is not None and record.active else None

    def _resolve(self, record: ConversionRecord, node: Any) -> Identity | None:
        if not isinstance(node, ToolCallNode) or node.tool_type != "function" or not node.name:
            return None
        ident = record.resolve(node.name, node.namespace, node.call_id)
        return ident if ident is not None and self.selects(ident[1]) else None

    def apply_response(self, resp: Response, ctx: TransformContext) -> None:
        record = self._record(ctx)
        if record is None:
            return
        restored_ids: set[str] = set()
        for i, node in enumerate(resp.output):
            ident = self._resolve(record, node)
            if ident is not None:
                resp.output[i] = restore_call(node, ident)
                restored_ids.add(node.call_id)
            elif (
                isinstance(node, ToolResultNode)
                and node.tool_type == "function"
                and node.call_id in restored_ids
            ):
                resp.output[i] = replace(node, tool_type="custom")

    # -- stream ------------------------------------------------------------------------------
    def new_stream_state(self, ctx: TransformContext) -> Any:
        return _StreamState()

    def apply_event(self, event: Event, state: Any, ctx: TransformContext) -> list[Event]:
        record = self._record(ctx)
        if record is None:
            return [event]
        st: _StreamState = state
        if st.failed:
            return []
        if isinstance(event, NodeDelta):
            pending = st.pending.get(event.index)
            if pending is None:
                return [event]
            if event.kind == ev.ARGUMENTS:
                pending.parts.append(event.delta)
            if pending.ident is None:
                pending.held.append(event)
                return []
            if event.kind != ev.ARGUMENTS:
                return [event]
            if event.extra:
                event.delta = ""
                return [event]
            return []
        if isinstance(event, NodeStart):
            node = event.node
            if isinstance(node, ToolCallNode):
                st.call_order.append(event.index)
            if isinstance(node, ToolCallNode) and node.tool_type == "function":
                if not node.name:
                    st.pending[event.index] = _Pending(event, None, held=[event])
                    return []
                ident = self._resolve(record, node)
                if ident is not None:
                    event.node = replace(
                        node,
                        id=custom_item_id(node.id),
                        tool_type="custom",
                        namespace=ident[0],
                        arguments="",
                        extra=dict(node.extra),
                    )
                    st.pending[event.index] = _Pending(event, ident, emitted=True)
            return [event]
        if isinstance(event, NodeDone):
            pending = st.pending.pop(event.index, None)
            if pending is None:
                return [event]
            return self._finish(record, st, pending, event.node, event.extra)
        if isinstance(event, ResponseDone):
            return self._response_done(record, st, event)
        if isinstance(event, StreamError):
            st.pending.clear()
            st.failed = True
        return [event]

    def _finish(
        self, record: ConversionRecord, st: _StreamState, pending: _Pending, node: Any, extra: dict[str, Any]
    ) -> list[Event]:
        """Close a buffered call: restored as one custom delta, or replayed unchanged."""
        index = pending.start.index
        ident = pending.ident if pending.ident is not None else self._resolve(record, node)
        if ident is None:
            return [*pending.held, NodeDone(index=index, node=node, extra=extra)]
        if not isinstance(node, ToolCallNode):
            node = pending.start.node
        arguments = node.arguments or "".join(pending.parts)
        restored = restore_call(node, ident, arguments)
        out: list[Event] = []
        if not pending.emitted:
            header = replace(restored, arguments="", extra=dict(restored.extra))
            out.append(NodeStart(index=index, node=header, extra=pending.start.extra))
            out.extend(
                NodeDelta(index=index, kind=ev.ARGUMENTS, delta="", extra=d.extra)
                for d in pending.held[1:]
                if isinstance(d, NodeDelta) and d.extra
            )
        if restored.arguments:
            out.append(NodeDelta(index=index, kind=ev.ARGUMENTS, delta=restored.arguments))
        out.append(NodeDone(index=index, node=restored, extra=extra))
        st.restored_index[index] = restored
        if restored.call_id:
            st.restored_call[restored.call_id] = restored
        return out

    def _response_done(self, record: ConversionRecord, st: _StreamState, event: ResponseDone) -> list[Event]:
        before: list[Event] = []
        by_call = {
            p.start.node.call_id: p for p in st.pending.values() if getattr(p.start.node, "call_id", None)
        }
        output = event.output
        ordinal = -1
        for pos, node in enumerate(output):
            if not isinstance(node, ToolCallNode):
                continue
            ordinal += 1
            if node.tool_type != "function":
                continue
            # A call without a call_id is matched to its stream node by its rank among the tool
            # calls: stream indices count every node (text, reasoning...) and need not equal the
            # call's position in the authoritative output.
            sidx = st.call_order[ordinal] if ordinal < len(st.call_order) else None
            if node.call_id:
                restored = st.restored_call.get(node.call_id)
            else:
                restored = st.restored_index.get(sidx) if sidx is not None else None
            if restored is None:
                pending = by_call.get(node.call_id) if node.call_id else None
                if (
                    pending is None
                    and not node.call_id
                    and sidx in st.pending
                    and not getattr(st.pending[sidx].start.node, "call_id", None)
                ):
                    pending = st.pending[sidx]
                if pending is not None:
                    st.pending.pop(pending.start.index, None)
                    before.extend(self._finish(record, st, pending, node, {}))
                    restored = st.restored_index.get(pending.start.index)
                else:
                    ident = self._resolve(record, node)
                    if ident is not None:  # never streamed: the client encoder synthesises it from output
                        restored = restore_call(node, ident)
            if restored is not None:
                output[pos] = restored
        for pending in list(st.pending.values()):  # started but absent from the authoritative output
            node = replace(pending.start.node, arguments="".join(pending.parts))
            before.extend(self._finish(record, st, pending, node, {}))
        st.pending.clear()
        return [*before, event]


@dataclass(slots=True)
class _Pending:
    start: NodeStart
    ident: Identity | None  # None: the name is not known yet, every event is held
    emitted: bool = False
    held: list[Event] = field(default_factory=list)
    parts: list[str] = field(default_factory=list)


@dataclass(slots=True)
class _StreamState:
    pending: dict[int, _Pending] = field(default_factory=dict)
    restored_call: dict[str, ToolCallNode] = field(default_factory=dict)
    restored_index: dict[int, ToolCallNode] = field(default_factory=dict)
    call_order: list[int] = field(default_factory=list)  # stream indices of tool calls, in order
    failed: bool = False


def _walk_tools(tools: list[ToolDef] | None):
    """(tool, namespace) for every tool, namespace members included."""
    for tool in tools or ():
        if tool.kind == "namespace":
            for member in tool.tools or ():
                yield member, tool.name
        else:
            yield tool, None


def _convert_tool(tool: ToolDef) -> None:
    """Turn a custom ToolDef into the equivalent function ToolDef, in place."""
    if tool.name == APPLY_PATCH:
        description = tool.description or ""
        if APPLY_PATCH_USAGE not in description:
            description = f"{description}\n\n{APPLY_PATCH_USAGE}" if description else APPLY_PATCH_USAGE
        tool.description = description
        tool.parameters = input_schema(APPLY_PATCH_INPUT)
    else:
        tool.parameters = input_schema(GENERIC_INPUT)
    tool.kind = "function"
    tool.strict = False
    tool.format = None
