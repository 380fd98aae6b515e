"""``field_remove``: delete a dotted path from the raw passthrough fields.

Request: removes from ``request.extra``; ``reasoning.effort`` clears the typed effort, other
``reasoning.<sub>`` paths remove from the reasoning object's extras and ``reasoning`` alone drops
the whole reasoning configuration. Typed top-level fields are not reachable (use
``field_strip_sampling``). Response: ``response.extra``, or every stream event's ``extra``.
A missing path, or an intermediate that is not an object, is a no-op.
"""

from __future__ import annotations

from typing import Any

from gateway.urp import Request, Response
from gateway.urp.events import Event
from transforms.base import NOT_FOR_KEYS, Transform, TransformContext, TransformExample
from transforms.builtin.field_set import check_path
from transforms.paths import remove_path, split_path


class FieldRemove(Transform):
    type_id = "field_remove"
    aliases = ("remove_field",)
    category = "field"
    name = {"en": "Field: remove", "zh": "字段：删除"}
    description = {
        "en": "Remove a raw request or response field at a dotted path.",
        "zh": "删除点分路径处的原始请求或响应字段。",
    }
    phases = ("request", "response")
    scopes = NOT_FOR_KEYS
    config_schema = {
        "type": "object",
        "properties": {
            "path": {
                "type": "string",
                "minLength": 1,
                "title": "Path",
                "description": "Dotted path, e.g. metadata.trace. Segments are object keys.",
            },
        },
        "required": ["path"],
    }

    examples = (
        TransformExample(
            title="Remove one key of a raw request object",
            phase="request",
            config={"path": "metadata.trace"},
            input={
                "model": "gpt-4o",
                "messages": [{"role": "user", "content": "hi"}],
                "metadata": {"trace": "1", "a": "2"},
            },
            expected={"metadata": {"a": "2"}},
        ),
        TransformExample(
            title="A path through a non-object changes nothing",
            phase="request",
            config={"path": "x.y"},
            input={"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}], "x": "s"},
            expected={"x": "s"},
        ),
        TransformExample(
            title="Remove an upstream's extra field from the response",
            phase="response",
            config={"path": "provider_debug"},
            input={
                "id": "c1",
                "object": "chat.completion",
                "created": 1,
                "model": "gpt-4o",
                "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}
                ],
                "provider_debug": {"node": "eu-1"},
            },
            expected={
                "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}
                ]
            },
            absent=("provider_debug",),
        ),
    )

    @classmethod
    def check(cls, config: dict[str, Any]) -> list[tuple[str, str]]:
        return check_path(config.get("path"))

    def setup(self) -> None:
        self.segments = split_path(self.config.get("path") or "")

    def apply_request(self, req: Request, ctx: TransformContext) -> None:
        segs = self.segments
        if not segs:
            return
        if segs[0] != "reasoning":
            remove_path(req.extra, segs)
        elif len(segs) == 1:
            req.reasoning = None
        elif req.reasoning is not None:
            if segs[1:] == ("effort",):
                req.reasoning.effort = None
            remove_path(req.reasoning.extra, segs[1:])

    def apply_response(self, resp: Response, ctx: TransformContext) -> None:
        remove_path(resp.extra, self.segments)

    def apply_event(self, event: Event, state: Any, ctx: TransformContext) -> list[Event]:
        extra = getattr(event, "extra", None)
        if extra:
            remove_path(extra, self.segments)
        return [event]
