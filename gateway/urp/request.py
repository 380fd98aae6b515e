"""The request, its tool definitions and controls, and the response with usage."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .nodes import Node

FINISH_REASONS = frozenset({"stop", "length", "tool_calls", "content_filter", "other"})
REASONING_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh", "max")


@dataclass(slots=True, kw_only=True)
class ToolDef:
    """A tool offered to the model.

    kind ``function``: name, description, parameters (JSON Schema), strict.
    kind ``custom``: freeform tool; ``format`` holds its grammar/format object when present.
    kind ``namespace``: a Responses namespace; ``tools`` holds its member tools.
    Any other kind is a provider-native tool (``web_search``, ``bash_20250124``...) whose whole
    configuration stays in ``extra`` and which is replayed only to its own protocol family
    (``origin_protocol``).

    ``extra`` holds unknown fields of the tool descriptor; ``inner_extra`` unknown fields of the
    Chat ``function``/``custom`` sub-object. Fields never move between those layers.
    """

    kind: str
    name: str | None = None
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None
    format: dict[str, Any] | None = None
    tools: list[ToolDef] | None = None
    origin_protocol: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    inner_extra: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True, kw_only=True)
class ReasoningConfig:
    """``effort`` normalised to one of REASONING_EFFORTS; ``extra`` keeps the raw native
    control objects (under internal keys) and unknown members."""

    effort: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True, kw_only=True)
class ResponseFormat:
    type: str  # "text" | "json_object" | "json_schema"
    name: str | None = None
    description: str | None = None
    schema: dict[str, Any] | None = None
    strict: bool | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True, kw_only=True)
class Request:
    """A decoded client request.

    ``tool_choice`` is a mode string (``auto``/``none``/``required``) or a canonical Chat-style
    dict: ``{"type": "function", "function": {"name"}}``, ``{"type": "custom", "custom":
    {"name"}}``, ``{"type": "allowed_tools", "allowed_tools": {"mode", "tools": [...]}}``, or a
    flat native selector. ``stop`` keeps the client's scalar-vs-list shape. ``extra`` holds
    every unknown top-level field verbatim; internal markers use the ``_gw_`` prefix.
    ``None`` means absent for every typed field.
    """

    model: str
    input: list[Node] = field(default_factory=list)
    stream: bool | None = None
    temperature: float | None = None
    top_p: float | None = None
    max_output_tokens: int | None = None
    reasoning: ReasoningConfig | None = None
    tools: list[ToolDef] | None = None
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    stop: str | list[str] | None = None
    verbosity: str | None = None
    response_format: ResponseFormat | None = None
    user: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True, kw_only=True)
class Usage:
    """Token counts. ``input_tokens`` is inclusive of cache reads and writes (OpenAI
    semantics); the Messages codec converts to and from Anthropic's exclusive count."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int | None = None
    cache_creation_tokens: int | None = None
    reasoning_tokens: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens


@dataclass(slots=True, kw_only=True)
class Response:
    """A whole (non-stream) response. ``finish_reason`` is one of FINISH_REASONS; the exact
    native reason (e.g. Anthropic ``stop_reason``) may be kept in ``extra`` under an internal key."""

    id: str
    model: str
    output: list[Node] = field(default_factory=list)
    finish_reason: str | None = None
    usage: Usage | None = None
    created: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)
