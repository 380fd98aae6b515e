"""reasoning_summary_heading: every reasoning summary starts with a ``**Title**`` heading line,
because Codex (and similar Responses clients) split and label summaries by such headings and
show untitled summaries badly.

Definitions
    sanitise(title): trim; newlines become spaces; ``*`` removed; cut to ``max_title_chars``
    characters (at the last whitespace inside the kept span when there is one); trim; empty
    becomes ``Thinking``.
    has a heading: the summary, leading whitespace removed, starts with ``**``, a later ``**``
    closes a non-empty title, and the character right after it is a newline (mid-sentence bold is
    no heading). The reference trimmed both ends first, so ``"**Plan**\\n"`` alone had no heading;
    we trim only the start so a stream and the whole response agree.
    derived title: the trimmed summary up to the first ``.``, ``!``, ``?`` or newline after its
    first character (else all of it), sanitised.

Behaviour
    Only ``summary`` is touched; content, encrypted payload and source never. An empty summary or
    one that already has a heading is left alone (idempotent). Otherwise the summary becomes
    ``**<title>**\\n\\n<summary>``, the title being the derived one with ``derive_title``, else
    ``default_title``.

Streams (improved over the reference, which prefixed the first delta blindly and could not
derive titles while streaming)
    The start of a node's summary is held back only as long as it cannot be decided: while it may
    still turn out to be a heading, and with ``derive_title`` until the end of the first sentence
    is known. Then it is emitted with the heading in front, and later deltas pass unchanged. A node
    whose summary never streamed gets one injected summary delta before its ``node_done``.
    ``NodeDone.node`` and ``ResponseDone.output`` carry the same formatted summary, so a stream
    ends exactly where the whole response does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gateway.urp import ReasoningNode, Response
from gateway.urp import events as ev
from gateway.urp.events import Event, NodeDelta, NodeDone, ResponseDone
from transforms.base import Transform, TransformContext, TransformExample

DEFAULT_TITLE = "Thinking"
_ENDS = ".!?\n\r"


def sanitise(title: str, max_chars: int) -> str:
    title = title.strip().replace("\n", " ").replace("\r", " ").replace("*", "")
    if len(title) > max_chars:
        kept = title[:max_chars]
        cut = max(kept.rfind(" "), kept.rfind("\t"))
        title = kept[:cut] if cut > 0 else kept
    return title.strip() or DEFAULT_TITLE


def heading_state(text: str) -> bool | None:
    """True/False when ``text`` (possibly only a beginning) decides whether the summary starts with
    a heading; None while more text could change the answer."""
    t = text.lstrip()
    if len(t) < 2:
        return None if t in ("", "*") else False
    if not t.startswith("**"):
        return False
    end = t.find("**", 2)
    if end < 0:
        return None
    if not t[2:end].strip():
        return False
    after = t[end + 2 : end + 3]
    if not after:
        return None
    return after in ("\n", "\r")


def has_heading(summary: str) -> bool:
    return heading_state(summary) is True


def derived_title(text: str, max_chars: int, *, final: bool) -> str | None:
    """The title derived from the summary's first sentence; None while ``text`` is only a
    beginning that does not contain the sentence end yet."""
    t = text.strip() if final else text.lstrip()
    for i, ch in enumerate(t):
        if i > 0 and ch in _ENDS:
            return sanitise(t[:i], max_chars)
    return sanitise(t, max_chars) if final else None


@dataclass(slots=True)
class _Node:
    pending: str = ""
    decided: bool = False
    seen: bool = False  # a summary delta was emitted
    extra: dict[str, Any] = field(default_factory=dict)


class ReasoningSummaryHeading(Transform):
    type_id = "reasoning_summary_heading"
    category = "reasoning"
    name = {"en": "Reasoning: summary heading", "zh": "推理：摘要标题"}
    description = {
        "en": "Starts every reasoning summary with a **Title** heading line (a fixed title or one taken from "
        "the first sentence), as Codex expects.",
        "zh": "为每段推理摘要加上 **标题** 行（固定标题或取自首句），符合 Codex 的显示方式。",
    }
    phases = ("response",)
    config_schema = {
        "type": "object",
        "properties": {
            "default_title": {"type": "string", "default": DEFAULT_TITLE, "title": "Default title"},
            "derive_title": {
                "type": "boolean",
                "default": False,
                "title": "Derive the title from the first sentence",
            },
            "max_title_chars": {
                "type": "integer",
                "minimum": 1,
                "default": 64,
                "title": "Maximum title length",
            },
        },
        "additionalProperties": False,
    }
    examples = (
        TransformExample(
            title="A summary gets the default heading",
            phase="response",
            protocol="responses",
            input={
                "id": "resp_1",
                "object": "response",
                "created_at": 1,
                "model": "o3",
                "status": "completed",
                "output": [
                    {
                        "type": "reasoning",
                        "id": "rs_1",
                        "summary": [{"type": "summary_text", "text": "I will check the file."}],
                    }
                ],
            },
            expected={
                "output": [
                    {
                        "type": "reasoning",
                        "id": "rs_1",
                        "summary": [
                            {"type": "summary_text", "text": "**Thinking**\n\nI will check the file."}
                        ],
                    }
                ]
            },
        ),
        TransformExample(
            title="A title derived from the first sentence",
            phase="response",
            protocol="responses",
            config={"derive_title": True},
            input={
                "id": "resp_1",
                "object": "response",
                "created_at": 1,
                "model": "o3",
                "status": "completed",
                "output": [
                    {
                        "type": "reasoning",
                        "id": "rs_1",
                        "summary": [{"type": "summary_text", "text": "I will check the file."}],
                    }
                ],
            },
            expected={
                "output": [
                    {
                        "type": "reasoning",
                        "id": "rs_1",
                        "summary": [
                            {
                                "type": "summary_text",
                                "text": "**I will check the file**\n\nI will check the file.",
                            }
                        ],
                    }
                ]
            },
        ),
    )

    def setup(self) -> None:
        self.max_chars: int = self.config["max_title_chars"]
        self.default_title = sanitise(self.config["default_title"], self.max_chars)
        self.derive: bool = self.config["derive_title"]

    def format(self, summary: str | None) -> str | None:
        if not summary or has_heading(summary):
            return summary
        title = derived_title(summary, self.max_chars, final=True) if self.derive else self.default_title
        return f"**{title}**\n\n{summary}"

    def _format_node(self, node: Any) -> None:
        if type(node) is ReasoningNode:
            node.summary = self.format(node.summary)

    def apply_response(self, resp: Response, ctx: TransformContext) -> None:
        for node in resp.output:
            self._format_node(node)

    # -- streams -----------------------------------------------------------------------------
    def new_stream_state(self, ctx: TransformContext) -> dict[int, _Node]:
        return {}

    def _decide(self, text: str, *, final: bool) -> str | None:
        """The text to emit for a summary beginning, or None to keep holding it."""
        state = heading_state(text)
        if state is None and not final:
            return None
        if state is True or (final and has_heading(text)):
            return text
        if self.derive:
            title = derived_title(text, self.max_chars, final=final)
            if title is None:
                return None
        else:
            title = self.default_title
        return f"**{title}**\n\n{text}"

    def apply_event(self, event: Event, state: dict[int, _Node], ctx: TransformContext) -> list[Event]:
        if isinstance(event, NodeDelta):
            if event.kind != ev.REASONING_SUMMARY or not event.delta:
                return [event]
            node = state.setdefault(event.index, _Node())
            if node.decided:
                return [event]
            node.pending += event.delta
            node.extra.update(event.extra)
            text = self._decide(node.pending, final=False)
            if text is None:
                return []
            node.decided = node.seen = True
            node.pending = ""
            event.delta = text
            event.extra = node.extra
            return [event]
        if isinstance(event, NodeDone):
            if type(event.node) is not ReasoningNode:
                return [event]
            node = state.get(event.index) or _Node()
            self._format_node(event.node)
            out: list[Event] = []
            summary = event.node.summary
            if node.pending:  # the held beginning, decided now that the summary is complete
                text = self._decide(node.pending, final=True) or node.pending
                out.append(
                    NodeDelta(index=event.index, kind=ev.REASONING_SUMMARY, delta=text, extra=node.extra)
                )
            elif not node.seen and summary:
                out.append(NodeDelta(index=event.index, kind=ev.REASONING_SUMMARY, delta=summary))
            state.pop(event.index, None)
            out.append(event)
            return out
        if isinstance(event, ResponseDone):
            for n in event.output:
                self._format_node(n)
        return [event]
