"""``field_set``: write a value at a dotted path of the raw passthrough fields.

Request: the path addresses ``request.extra`` (every unknown top-level field, emitted flat next to
the typed ones), except ``reasoning.<sub>``: ``reasoning.effort`` sets the typed effort and any
other sub-path goes into the reasoning object's own extras (the object is created for an
unconditional write). Typed top-level fields (temperature, max tokens...) are owned by the
encoders and are not reachable here; use ``field_strip_sampling`` / ``field_override_max_tokens``.
Response: ``response.extra`` for a whole response, the event-level ``extra`` of every stream event.

``when_equals`` makes the write conditional: the current value must exist and be JSON-equal
(JSON null counts as a present value that matches only an existing null). Paths addressing the
gateway's internal ``_gw_`` markers are rejected on save.
"""

from __future__ import annotations

from typing import Any

from gateway.urp import ReasoningConfig, Request, Response
from gateway.urp.events import Event
from gateway.urp.request import REASONING_EFFORTS
from transforms.base import NOT_FOR_KEYS, Transform, TransformContext, TransformExample
from transforms.paths import ABSENT, get_path, has_internal_segment, set_path, split_path


def check_path(path: Any) -> list[tuple[str, str]]:
    segments = split_path(path) if isinstance(path, str) else ()
    if not segments:
        return [("path", "The path must name at least one key (segments are separated by '.').")]
    if has_internal_segment(segments):
        return [("path", "Keys starting with '_gw_' are internal to the gateway and cannot be addressed.")]
    return []


class FieldSet(Transform):
    type_id = "field_set"
    aliases = ("set_field",)
    category = "field"
    name = {"en": "Field: set", "zh": "字段：设置"}
    description = {
        "en": "Set a raw request or response field at a dotted path (optionally only when it currently equals a value).",
        "zh": "在点分路径处设置原始请求或响应字段（可选：仅当当前值等于指定值时）。",
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
                "description": "Dotted path, e.g. service_tier or metadata.trace_id. Segments are object keys.",
            },
            "value": {"title": "Value", "description": "Any JSON value (null included)."},
            "when_equals": {
                "title": "Only when equal to",
                "description": "Optional: write only when the current value exists and equals this JSON value.",
            },
        },
        "required": ["path", "value"],
    }

    examples = (
        TransformExample(
            title="Conditional write: priority becomes fast",
            phase="request",
            config={"path": "service_tier", "when_equals": "priority", "value": "fast"},
            input={
                "model": "gpt-4o",
                "messages": [{"role": "user", "content": "hi"}],
                "service_tier": "priority",
            },
            expected={"service_tier": "fast"},
        ),
        TransformExample(
            title="Conditional write: any other value is left alone",
            phase="request",
            config={"path": "service_tier", "when_equals": "priority", "value": "fast"},
            input={
                "model": "gpt-4o",
                "messages": [{"role": "user", "content": "hi"}],
                "service_tier": "default",
            },
            expected={"service_tier": "default"},
        ),
        TransformExample(
            title="when_equals null matches only an existing null",
            phase="request",
            config={"path": "service_tier", "when_equals": None, "value": "default"},
            input={"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}], "service_tier": None},
            expected={"service_tier": "default"},
        ),
        TransformExample(
            title="An unconditional write creates the objects on its path",
            phase="request",
            config={"path": "a.b.c", "value": 1},
            input={"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}], "a": 5},
            expected={"a": {"b": {"c": 1}}},
        ),
    )

    @classmethod
    def check(cls, config: dict[str, Any]) -> list[tuple[str, str]]:
        errors = check_path(config.get("path"))
        segments = split_path(config.get("path") or "")
        if (
            segments == ("reasoning", "effort")
            and config.get("value") is not None
            and config.get("value") not in REASONING_EFFORTS
        ):
            errors.append(
                ("value", f"reasoning.effort must be one of {', '.join(REASONING_EFFORTS)} or null.")
            )
        if segments == ("reasoning",) and not isinstance(config.get("value"), dict | None):
            errors.append(("value", "reasoning must be set to an object or null."))
        return errors

    def setup(self) -> None:
        self.segments = split_path(self.config.get("path") or "")
        self.value = self.config.get("value")
        self.conditional = "when_equals" in self.config
        self.expected = self.config.get("when_equals")

    # -- shared ------------------------------------------------------------------------------
    def _write(self, root: dict[str, Any], segments: tuple[str, ...]) -> None:
        if self.conditional:
            current = get_path(root, segments)
            if current is ABSENT or not json_equal(current, self.expected):
                return
        set_path(root, segments, _fresh(self.value))

    # -- request -----------------------------------------------------------------------------
    def apply_request(self, req: Request, ctx: TransformContext) -> None:
        segs = self.segments
        if not segs:
            return
        if segs[0] != "reasoning":
            self._write(req.extra, segs)
            return
        if len(segs) == 1:
            self._set_whole_reasoning(req)
            return
        if segs[1] == "effort" and len(segs) == 2:
            current = req.reasoning.effort if req.reasoning is not None else None
            if self.conditional and (current is None or not json_equal(current, self.expected)):
                return
            if req.reasoning is None:
                req.reasoning = ReasoningConfig()
            req.reasoning.effort = self.value
            req.reasoning.extra.pop("effort", None)
            return
        if req.reasoning is None:
            if self.conditional:
                return
            req.reasoning = ReasoningConfig()
        self._write(req.reasoning.extra, segs[1:])

    def _set_whole_reasoning(self, req: Request) -> None:
        if self.conditional:
            return  # a typed object never JSON-equals an operator value reliably; refuse to guess
        if self.value is None:
            req.reasoning = None
            return
        value = dict(self.value)
        effort = value.pop("effort", None)
        req.reasoning = ReasoningConfig(effort=effort if effort in REASONING_EFFORTS else None, extra=value)

    # -- response ----------------------------------------------------------------------------
    def apply_response(self, resp: Response, ctx: TransformContext) -> None:
        self._write(resp.extra, self.segments)

    def apply_event(self, event: Event, state: Any, ctx: TransformContext) -> list[Event]:
        extra = getattr(event, "extra", None)
        if extra is not None:
            self._write(extra, self.segments)
        return [event]


def json_equal(a: Any, b: Any) -> bool:
    """Structural JSON equality: 1 and 1.0 are the same number, but ``true`` is not ``1``
    (Python's ``==`` says it is)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(v, b[k]) for k, v in a.items())
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def _fresh(value: Any) -> Any:
    """Containers are copied so one request never mutates the rule's configured value."""
    if isinstance(value, dict):
        return {k: _fresh(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_fresh(v) for v in value]
    return value
