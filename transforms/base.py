"""The transform interface. One subclass per module in ``transforms/builtin/``.

A transform instance is built once per rule when the configuration snapshot is built (config
parsed and defaults applied then, never per request) and is shared by every request: keep
per-request data in ``ctx`` and per-stream data in the state returned by ``new_stream_state``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from gateway.errors import TransformFailed, TransformRejected  # noqa: F401 - re-exported for plug-in authors
from gateway.proxy.chain import TransformContext  # re-exported: plug-ins import it from here
from gateway.urp import Request, Response
from gateway.urp.events import Event

ALL_SCOPES = ("provider", "global", "api_key")
NOT_FOR_KEYS = ("provider", "global")


@dataclass(frozen=True, slots=True)
class TransformExample:
    """A worked example declared next to the transform's code, shown in the admin and the
    registry endpoint and run by one parametrised test (and by the start-up system check).

    ``input`` is a wire body in ``protocol`` (a client request for the request phase, an
    upstream response for the response phase). The runner decodes it into the typed
    representation, applies the transform with ``config``, encodes the result in the same
    protocol and compares: every top-level key of ``expected`` must equal the encoded value
    (keys not named in ``expected`` are not compared, so an example states only what the rule
    touches). ``absent`` names top-level keys that must not be in the result (a field the rule
    removes). ``context`` overrides ``TransformContext`` fields (``upstream_protocol``,
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
    absent: tuple[str, ...] = ()  # top-level keys the result must not have


class Transform:
    type_id: ClassVar[str]
    category: ClassVar[str]  # cache, field, image, prompt, reasoning, role, stream
    name: ClassVar[dict[str, str]]  # {"en": ..., "zh": ...}
    description: ClassVar[dict[str, str]]
    phases: ClassVar[tuple[str, ...]]
    scopes: ClassVar[tuple[str, ...]] = ALL_SCOPES
    config_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {},
        "additionalProperties": False,
    }
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
        """(dotted path, message) pairs; empty when valid. Schema first, then own checks.

        jsonschema is imported here, not at module level: the proxy's workers import every
        transform but validate no configuration (the admin, the API and ``loadconfig`` do), and
        jsonschema with its dependencies is ~5 MB of each worker's resident memory."""
        import jsonschema

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

    # Async variants, for rules that do I/O (fetching URLs) or heavy CPU work (image codecs) that
    # must not block the event loop. When a subclass defines them, the proxy's chain runner
    # awaits them *in place of* the sync method, at the rule's own position in the chain; the sync
    # methods stay the reference behaviour (worked examples, count_tokens, tests) and may do the
    # same work inline. Streams stay synchronous: such rules ask for whole-response mode.
    apply_request_async: ClassVar[Any] = None  # async def apply_request_async(self, req, ctx) -> None
    apply_response_async: ClassVar[Any] = None  # async def apply_response_async(self, resp, ctx) -> None

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

    # -- client stream bytes --------------------------------------------------------------
    def wrap_stream_encoder(self, encoder: Any, ctx: TransformContext) -> Any:
        """Return an encoder for the client's stream (``ctx.client_protocol``) that wraps
        ``encoder``: same interface (``encode(event)``, ``keepalive()``, ``error(...)``,
        ``close()``, each returning bytes). For transforms that act on the bytes the client
        receives rather than on events. Called before a client stream starts, once per transform
        type (the first matching response rule in execution order wins); this default returns
        ``encoder`` itself. See ``transforms.engine.wrap_stream_encoder``."""
        return encoder
