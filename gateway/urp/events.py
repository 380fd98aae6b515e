"""Canonical stream events.

A stream decoder turns upstream SSE into these; response transforms rewrite them; a stream
encoder turns them into the client's SSE. Invariants every decoder keeps:

- ``index`` is URP-local, 0, 1, 2... in first-seen order.
- Exactly one NodeStart and one NodeDone per index, deltas in between.
- The stream ends with exactly one ResponseDone or StreamError; EOF without protocol terminal
  evidence is a StreamError, never a synthesised success.
- ``ResponseDone.output`` is the complete, authoritative node list.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .nodes import Node
from .request import Usage

# NodeDelta kinds
TEXT = "text"  # TextNode.content
REFUSAL = "refusal"  # RefusalNode.content
REASONING_CONTENT = "reasoning_content"  # ReasoningNode.content
REASONING_SUMMARY = "reasoning_summary"  # ReasoningNode.summary
REASONING_ENCRYPTED = "reasoning_encrypted"  # ReasoningNode.encrypted (string fragments concatenate)
ARGUMENTS = "arguments"  # ToolCallNode.arguments


@dataclass(slots=True, kw_only=True)
class ResponseStart:
    id: str
    model: str
    created: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    type = "response_start"


@dataclass(slots=True, kw_only=True)
class NodeStart:
    """``node`` is a header: the node with its identifying fields set (role, call id, name,
    tool type...) and empty content."""

    index: int
    node: Node
    extra: dict[str, Any] = field(default_factory=dict)

    type = "node_start"


@dataclass(slots=True, kw_only=True)
class NodeDelta:
    index: int
    kind: str
    delta: str
    extra: dict[str, Any] = field(default_factory=dict)

    type = "node_delta"


@dataclass(slots=True, kw_only=True)
class NodeDone:
    """``node`` is the complete node."""

    index: int
    node: Node
    extra: dict[str, Any] = field(default_factory=dict)

    type = "node_done"


@dataclass(slots=True, kw_only=True)
class ResponseDone:
    output: list[Node] = field(default_factory=list)
    finish_reason: str | None = None
    usage: Usage | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    type = "response_done"


@dataclass(slots=True, kw_only=True)
class StreamError:
    message: str
    code: str | None = None
    error_type: str | None = None
    status: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    type = "error"


@dataclass(slots=True, kw_only=True)
class ProviderControl:
    """A non-content native event (Messages ``ping``, unknown Responses events), replayed only
    to the same protocol."""

    protocol: str
    event_name: str
    data: Any = None

    type = "provider_control"


Event = ResponseStart | NodeStart | NodeDelta | NodeDone | ResponseDone | StreamError | ProviderControl
