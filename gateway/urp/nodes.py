"""Nodes of the internal representation: one node per source-order semantic unit.

Decoders emit a flat list of nodes and never group them into messages; only encoders group.
Every node carries ``extra``: the unknown wire fields of exactly that block/part/item, kept
verbatim so a same-protocol hop is lossless. Keys starting with ``INTERNAL_PREFIX`` are
gateway provenance markers: encoders may read them but never emit them, decoders never accept
them from the wire.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

INTERNAL_PREFIX = "_gw_"

Role = Literal["system", "developer", "user", "assistant"]
ROLES: frozenset[str] = frozenset({"system", "developer", "user", "assistant"})


@dataclass(slots=True)
class MediaSource:
    """Where an image, audio clip or file comes from.

    kind: ``url`` (url, detail), ``base64`` (media_type, data, filename), ``file_id`` (file_id,
    detail), ``text`` (text) or ``content`` (content: list of raw JSON blocks).
    Data URLs stay ``url`` sources; only encoders that need base64 split them.
    """

    kind: str
    url: str | None = None
    data: str | None = None
    media_type: str | None = None
    file_id: str | None = None
    filename: str | None = None
    detail: str | None = None
    text: str | None = None
    content: list[Any] | None = None


@dataclass(slots=True, kw_only=True)
class Node:
    id: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    type = "node"


@dataclass(slots=True, kw_only=True)
class TextNode(Node):
    role: str = "user"
    content: str = ""
    phase: str | None = None

    type = "text"


@dataclass(slots=True, kw_only=True)
class ImageNode(Node):
    role: str = "user"
    source: MediaSource

    type = "image"


@dataclass(slots=True, kw_only=True)
class AudioNode(Node):
    role: str = "user"
    source: MediaSource

    type = "audio"


@dataclass(slots=True, kw_only=True)
class FileNode(Node):
    role: str = "user"
    source: MediaSource

    type = "file"


@dataclass(slots=True, kw_only=True)
class RefusalNode(Node):
    content: str = ""
    role: str = "assistant"

    type = "refusal"


@dataclass(slots=True, kw_only=True)
class ReasoningNode(Node):
    """Assistant reasoning. ``content`` is plaintext chain of thought, ``summary`` a plaintext
    summary (Anthropic thinking text maps here), ``encrypted`` the opaque provider payload or
    signature (any JSON), ``source`` a provider-supplied format id."""

    content: str | None = None
    summary: str | None = None
    encrypted: Any = None
    source: str | None = None
    role: str = "assistant"

    type = "reasoning"


@dataclass(slots=True, kw_only=True)
class ToolCallNode(Node):
    """A call the assistant made. ``arguments`` is JSON text for function tools and the raw
    freeform input for custom tools."""

    call_id: str
    name: str
    arguments: str = ""
    tool_type: str = "function"  # "function" | "custom"
    namespace: str | None = None
    role: str = "assistant"

    type = "tool_call"


@dataclass(slots=True, kw_only=True)
class ToolResultNode(Node):
    """Output of a tool call. Has no role. ``content`` holds TextNode, ImageNode, FileNode or
    ProviderItemNode entries in wire order."""

    call_id: str
    content: list[Node] = field(default_factory=list)
    is_error: bool = False
    tool_type: str = "function"
    namespace: str | None = None
    role: str = "tool"

    type = "tool_result"


@dataclass(slots=True, kw_only=True)
class ProviderItemNode(Node):
    """A native unit the adapter cannot type, replayed verbatim only to the same protocol."""

    origin_protocol: str
    item_type: str
    body: dict[str, Any]
    role: str = "assistant"

    type = "provider_item"


@dataclass(slots=True, kw_only=True)
class EnvelopeExtraNode(Node):
    """Control node: unknown fields of an enclosing message/envelope, applied to the next
    envelope an encoder emits, then consumed."""

    role: str = "control"

    type = "envelope_extra"


NODE_TYPES: dict[str, type[Node]] = {
    cls.type: cls
    for cls in (
        TextNode,
        ImageNode,
        AudioNode,
        FileNode,
        RefusalNode,
        ReasoningNode,
        ToolCallNode,
        ToolResultNode,
        ProviderItemNode,
        EnvelopeExtraNode,
    )
}


def wire_extra(extra: dict[str, Any] | None) -> dict[str, Any]:
    """The part of an ``extra`` map that may go on the wire (internal markers removed)."""
    if not extra:
        return {}
    return {k: v for k, v in extra.items() if not k.startswith(INTERNAL_PREFIX)}


def accept_extra(raw: dict[str, Any], known: frozenset[str] | set[str]) -> dict[str, Any]:
    """Unknown fields of a wire object, refusing spoofed internal markers."""
    return {k: v for k, v in raw.items() if k not in known and not k.startswith(INTERNAL_PREFIX)}
