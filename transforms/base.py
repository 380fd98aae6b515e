"""The transform interface. One subclass per module in ``transforms/builtin/``.

A transform instance is built once per rule when the configuration snapshot is built (config
parsed and defaults applied then, never per request) and is shared by every request: keep
per-request data in ``ctx`` and per-stream data in the state returned by ``new_stream_state``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import jsonschema

from gateway.urp import Request, Response
from gateway.urp.events import Event

ALL_SCOPES = ("provider", "global", "api_key")
NOT_FOR_KEYS = ("provider", "global")


class TransformRejected(Exception):
    """The client's request cannot be served under this rule (a client mistake): 400 in the
    client's protocol shape."""

    def __init__(self, message: str, *, param: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param


class TransformFailed(Exception):
    """An operator's rule failed at run time: 500 ``transform_apply_failed``."""


@dataclass(slots=True)
class TransformContext:
    """Per-attempt facts a transform may read. ``shared`` is per-attempt scratch space that a
    request rule can use to tell the paired response rule what it did (keyed by type id); it is
    never serialised and no client input reaches it (the cache rules keep marker ownership there).
    ``api_key_id`` and ``username`` identify the calling key and its owner."""

    logical_model: str
    client_protocol: str
    upstream_protocol: str | None = None
    upstream_model: str | None = None
    provider: str | None = None
    api_key_id: int | None = None
    username: str | None = None  # the key owner's username: identity for cache keys, never on the wire
    stream: bool = False
    shared: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class TransformExample:
    """A worked example declared next to the transform's code, shown in the admin and the
    registry endpoint and run by one parametrised test (and by the start-up system check).

    ``input`` is a wire body in ``protocol`` (a client request for the request phase, an
    upstream response for the response phase). The runner decodes it into the typed
    representation, applies the transform with ``config``, encodes the result in the same
    protocol and compares: every top-level key of ``expected`` must equal the encoded value
    (keys not named in ``expected`` are not compared, so an example states only what the rule
    touches). ``context`` overrides ``TransformContext`` fields (``upstream_protocol``,
    ``logical_model``...).
    """

    title: str
    phase: str  # "request" or "response"
    input: dict[str, Any]
    expected: dict[str, Any]
    config: dict[str, Any] = field(default_factory=dict)
    protocol: str = "chat_completion"
    context: dict[str, Any] = field(default_factory=dict)
    note: dict[str, str] | None = None  # {"en": ..., "zh": ...} shown under the example


class Transform:
    type_id: ClassVar[str]
    category: ClassVar[str]  # cache, field, image, prompt, reasoning, role, stream
    name: ClassVar[dict[str, str]]  # {"en": ..., "zh": ...}
    description: ClassVar[dict[str, str]]
    phases: ClassVar[tuple[str, ...]]
    scopes: ClassVar[tuple[str, ...]] = ALL_SCOPES
    config_schema: ClassVar[dict[str, Any]] = {"type": "object", "properties": {}, "additionalProperties": False}
    aliases: ClassVar[tuple[str, ...]] = ()  # historical ids accepted on input, stored canonically
    examples: ClassVar[tuple[TransformExample, ...]] = ()

    def __init__(self, config: dict[str, Any] | None = None) -> None:
        self.config = self.with_defaults(config or {})
        self.setup()

    # -- configuration ------------------------------------------------------------------
    @classmethod
    def with_defaults(cls, config: dict[str, Any]) -> dict[str, Any]:
        merged = dict(config)
        for key, prop in cls.config_schema.get("properties", {}).items():
            if key not in merged and "default" in prop:
                merged[key] = prop["default"]
        return merged

    @classmethod
    def validate_config(cls, config: dict[str, Any]) -> list[tuple[str, str]]:
        """(dotted path, message) pairs; empty when valid. Schema first, then own checks."""
        validator = jsonschema.Draft202012Validator(cls.config_schema)
        errors = [
            (".".join(str(p) for p in err.absolute_path), err.message)
            for err in sorted(validator.iter_errors(config), key=lambda e: list(e.absolute_path))
        ]
        if not errors:
            errors = cls.check(cls.with_defaults(config))
        return errors

    @classmethod
    def check(cls, config: dict[str, Any]) -> list[tuple[str, str]]:
        """Checks JSON Schema cannot express."""
        return []

    def setup(self) -> None:
        """Precompute from ``self.config`` (compiled patterns and the like)."""

    # -- request phase ------------------------------------------------------------------
    def apply_request(self, req: Request, ctx: TransformContext) -> None:
        """Rewrite the request in place."""

    # -- response phase -----------------------------------------------------------------
    def apply_response(self, resp: Response, ctx: TransformContext) -> None:
        """Rewrite a whole response in place."""

    def needs_whole_response(self, ctx: TransformContext) -> bool:
        """True when this rule cannot work event by event for this request; the runtime then
        calls the upstream without streaming and synthesises the client's stream."""
        return False

    def new_stream_state(self, ctx: TransformContext) -> Any:
        return None

    def apply_event(self, event: Event, state: Any, ctx: TransformContext) -> list[Event]:
        """Rewrite one stream event: return the events to emit in its place (drop, replace or
        insert). Must keep every node's start/deltas/done lifecycle valid and keep
        ``NodeDone.node`` and ``ResponseDone.output`` consistent with what was streamed."""
        return [event]
