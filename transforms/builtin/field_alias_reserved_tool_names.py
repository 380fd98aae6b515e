"""``field_alias_reserved_tool_names``: rename client tools whose names an upstream reserves.

Some upstreams (xAI Grok) treat a function named like one of their hosted tools (``view_image``)
as that hosted tool. The request rule renames top-level function and custom tools, assistant
tool-call history and every ``name`` member of an object ``tool_choice`` (at any depth) from the
original to the alias; the response rule renames calls back (non-stream output, stream
``NodeStart`` headers, ``NodeDone`` nodes and ``ResponseDone.output``).

Differences from the reference, on purpose:
- Only un-namespaced tools and calls are renamed: a namespaced member is qualified by its
  namespace already, and renaming its calls but not its declaration would break the pairing.
- The response rule reverses only the aliases its request rule actually applied in this upstream
  attempt (recorded in ``ctx.shared``), so a client that itself declares a tool named like an
  alias keeps its name. When no request rule ran, the full configured map is reversed.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from gateway.urp import Request, Response, ToolCallNode
from gateway.urp.events import Event, NodeDone, NodeStart, ResponseDone
from transforms.base import ALL_SCOPES, Transform, TransformContext, TransformExample

RENAMED_KINDS = frozenset({"function", "custom"})


class FieldAliasReservedToolNames(Transform):
    type_id = "field_alias_reserved_tool_names"
    category = "field"
    name = {"en": "Field: alias reserved tool names", "zh": "字段：为保留工具名设置别名"}
    description = {
        "en": "Rename client tools whose names the upstream reserves for hosted tools, and rename the calls back "
        "in the response. Add a request rule and a response rule with the same config.",
        "zh": "将与上游托管工具同名的客户端工具改名，并在响应中把调用名改回。请添加配置相同的 request 与 response 两条规则。",
    }
    phases = ("request", "response")
    scopes = ALL_SCOPES
    config_schema = {
        "type": "object",
        "properties": {
            "aliases": {
                "type": "object",
                "title": "Aliases",
                "description": "Original tool name -> alias sent upstream. {} turns the rule off.",
                "additionalProperties": {"type": "string", "minLength": 1},
                "default": {"view_image": "client_view_image"},
            },
        },
    }

    examples = (
        TransformExample(
            title="A client function named like a hosted tool is renamed for the upstream",
            phase="request",
            protocol="responses",
            input={
                "model": "grok-4",
                "input": "Look at a.png",
                "tools": [
                    {
                        "type": "function",
                        "name": "view_image",
                        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
                    },
                    {"type": "web_search"},
                ],
            },
            expected={
                "tools": [
                    {
                        "type": "function",
                        "name": "client_view_image",
                        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
                    },
                    {"type": "web_search"},
                ]
            },
            note={
                "en": "Default config: view_image is sent as client_view_image; other tool kinds keep their names.",
                "zh": "默认配置：view_image 以 client_view_image 发送；其他类型的工具名不变。",
            },
        ),
        TransformExample(
            title="The response rule renames the call back; other calls are untouched",
            phase="response",
            protocol="responses",
            input={
                "id": "resp_1",
                "object": "response",
                "model": "grok-4",
                "status": "completed",
                "output": [
                    {
                        "type": "function_call",
                        "id": "fc_1",
                        "call_id": "call_1",
                        "name": "client_view_image",
                        "arguments": '{"path":"a.png"}',
                        "status": "completed",
                    },
                    {
                        "type": "function_call",
                        "id": "fc_2",
                        "call_id": "call_2",
                        "name": "exec_command",
                        "arguments": "{}",
                        "status": "completed",
                    },
                ],
            },
            expected={
                "output": [
                    {
                        "type": "function_call",
                        "id": "fc_1",
                        "call_id": "call_1",
                        "name": "view_image",
                        "arguments": '{"path":"a.png"}',
                        "status": "completed",
                    },
                    {
                        "type": "function_call",
                        "id": "fc_2",
                        "call_id": "call_2",
                        "name": "exec_command",
                        "arguments": "{}",
                        "status": "completed",
                    },
                ]
            },
        ),
    )

    @classmethod
    def check(cls, config: dict[str, Any]) -> list[tuple[str, str]]:
        aliases = config.get("aliases") or {}
        errors: list[tuple[str, str]] = []
        seen: dict[str, str] = {}
        for original, alias in aliases.items():
            if not original:
                errors.append(("aliases", "Tool names must not be empty."))
            elif alias == original:
                errors.append((f"aliases.{original}", "The alias must differ from the original name."))
            elif alias in aliases:
                errors.append((f"aliases.{original}", f"The alias {alias!r} is itself an original name."))
            elif alias in seen:
                errors.append(
                    (f"aliases.{original}", f"The alias {alias!r} is already used for {seen[alias]!r}.")
                )
            seen.setdefault(alias, original)
        return errors

    def setup(self) -> None:
        self.forward: dict[str, str] = dict(self.config.get("aliases") or {})
        self.reverse: dict[str, str] = {v: k for k, v in self.forward.items()}

    # -- request -----------------------------------------------------------------------------
    def apply_request(self, req: Request, ctx: TransformContext) -> None:
        fwd = self.forward
        if not fwd:
            return
        applied: dict[str, str] = ctx.shared.setdefault(self.type_id, {})
        for tool in req.tools or ():
            if tool.kind in RENAMED_KINDS and tool.name in fwd:
                applied[fwd[tool.name]] = tool.name
                tool.name = fwd[tool.name]
        for node in req.input:
            if isinstance(node, ToolCallNode) and node.namespace is None and node.name in fwd:
                applied[fwd[node.name]] = node.name
                node.name = fwd[node.name]
        if isinstance(req.tool_choice, dict | list):
            _rename_names(req.tool_choice, fwd, applied)

    # -- response ----------------------------------------------------------------------------
    def _reverse_map(self, ctx: TransformContext) -> dict[str, str]:
        if not self.forward:
            return {}
        applied = ctx.shared.get(self.type_id)
        return self.reverse if applied is None else applied

    def apply_response(self, resp: Response, ctx: TransformContext) -> None:
        rev = self._reverse_map(ctx)
        if rev:
            resp.output = [_restored(node, rev) for node in resp.output]

    def apply_event(self, event: Event, state: Any, ctx: TransformContext) -> list[Event]:
        rev = self._reverse_map(ctx)
        if not rev:
            return [event]
        if isinstance(event, NodeStart | NodeDone):
            event.node = _restored(event.node, rev)
        elif isinstance(event, ResponseDone):
            event.output = [_restored(node, rev) for node in event.output]
        return [event]


def _restored(node: Any, rev: dict[str, str]) -> Any:
    if isinstance(node, ToolCallNode) and node.namespace is None and node.name in rev:
        return replace(node, name=rev[node.name])
    return node


def _rename_names(value: Any, fwd: dict[str, str], applied: dict[str, str]) -> None:
    """Rename every object member called ``name`` whose string value is mapped, at any depth."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "name" and isinstance(item, str) and item in fwd:
                applied[fwd[item]] = item
                value[key] = fwd[item]
            elif isinstance(item, dict | list):
                _rename_names(item, fwd, applied)
    elif isinstance(value, list):
        for item in value:
            _rename_names(item, fwd, applied)
