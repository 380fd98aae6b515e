"""The small records the Responses stream encoder keeps: one per announced output item, one per
content part, one per node not shown yet. Kept apart so the encoder module holds only the
event -> frame logic."""

from __future__ import annotations

from typing import Any

from gateway.urp.nodes import Node


class _Part:
    __slots__ = ("index", "ptype", "text", "open", "extra")

    def __init__(self, index: int, ptype: str) -> None:
        self.index = index
        self.ptype = ptype  # output_text | refusal
        self.text = ""
        self.open = True
        self.extra: dict[str, Any] = {}


class _Item:
    """One wire output item the encoder has announced with ``output_item.added``."""

    __slots__ = (
        "oi",
        "id",
        "kind",
        "head",
        "parts",
        "sealed",
        "final",
        "role",
        "phase",
        "src_id",
        "summary",
        "summary_open",
        "summary_sep",
        "parts_text",
        "content",
        "content_open",
        "args",
    )

    def __init__(self, oi: int, item_id: str, kind: str, head: dict[str, Any]) -> None:
        self.oi = oi
        self.id = item_id
        self.kind = kind  # message | reasoning | function_call | custom_tool_call | provider
        self.head = head
        self.parts: list[_Part] = []
        self.sealed = False
        self.final: dict[str, Any] | None = None
        self.role = "assistant"
        self.phase: str | None = None
        self.src_id: str | None = None
        self.summary = ""  # the whole URP summary seen so far (parts joined by SUMMARY_SEP)
        self.summary_open = False
        self.summary_sep = False
        self.parts_text: list[str] = []  # wire summary parts
        self.content = ""
        self.content_open = False
        self.args = ""


class _Pending:
    """A text/refusal/reasoning node not yet shown (no meaningful payload yet)."""

    __slots__ = ("node",)

    def __init__(self, node: Node) -> None:
        self.node = node
