"""reasoning_from_think_xml: ``<think>…</think>`` blocks inside assistant text become reasoning
nodes, for upstreams (DeepSeek-R1 style, many open-weight servers) that put their chain of thought
in the visible text.

Whole responses
    Only assistant text nodes are read. A node without ``<tag>`` stays exactly as it is (id, phase,
    extras). Otherwise it becomes, in order: the text before ``<tag>`` (a text node), the text up to
    ``</tag>`` (a reasoning node with that ``content``), and so on for every further block; an
    unclosed ``<tag>`` makes the whole rest reasoning; empty pieces give no node. Matching is exact
    and case-sensitive; ``<tag attr>`` or ``< tag>`` is not a tag.

    Deliberate choices (the reference gives new pieces no id and no extras): the first piece, when
    it is text, keeps the original node's id and extras, because a stream has already sent that
    text under the original header before any tag shows up; every text piece keeps the node's role
    and phase. Reasoning pieces carry only ``content``.

Streams (the reference's stream handling loses text next to a tag and misses split tags; this one
does not)
    Tags are found however the upstream splits them across deltas, one character per delta
    included: a delta's tail that could still be the start of a tag is held back until the next
    delta decides, and is never emitted as text. Each piece becomes its own node with a proper
    start, deltas and done; the pieces get consecutive indices and every other node of the response
    is renumbered after them, so indices stay dense and in output order (the encoders rely on
    that). At the end of a text node a held-back partial tag is flushed: as text outside a block,
    as reasoning inside an unclosed block (as the whole-response rule does). ``NodeDone.node`` of
    each piece and ``ResponseDone.output`` hold exactly what was streamed, which is the
    whole-response result for the same text.
"""

from __future__ import annotations

from copy import copy
from dataclasses import dataclass, field, replace
from typing import Any, TypeGuard

from gateway.urp import ReasoningNode, Response, TextNode
from gateway.urp import events as ev
from gateway.urp.events import Event, NodeDelta, NodeDone, NodeStart, ResponseDone
from gateway.urp.nodes import Node
from transforms.base import Transform, TransformContext, TransformExample
from transforms.lib.reasoning_helpers import TAG_SCHEMA

TEXT, REASONING = "text", "reasoning"


def split_pieces(text: str, tag: str) -> list[tuple[str, str]] | None:
    """(kind, text) pieces of ``text``, or None when it holds no ``<tag>``."""
    open_tag, close_tag = f"<{tag}>", f"</{tag}>"
    if open_tag not in text:
        return None
    pieces: list[tuple[str, str]] = []
    pos = 0
    while pos < len(text):
        start = text.find(open_tag, pos)
        if start < 0:
            pieces.append((TEXT, text[pos:]))
            break
        pieces.append((TEXT, text[pos:start]))
        inner = start + len(open_tag)
        end = text.find(close_tag, inner)
        if end < 0:
            pieces.append((REASONING, text[inner:]))
            break
        pieces.append((REASONING, text[inner:end]))
        pos = end + len(close_tag)
    return [(kind, piece) for kind, piece in pieces if piece]


def split_node(node: TextNode, tag: str) -> list[Node]:
    """The whole-response rule for one assistant text node."""
    pieces = split_pieces(node.content, tag)
    if pieces is None:
        return [node]
    out: list[Node] = []
    for i, (kind, piece) in enumerate(pieces):
        if kind == REASONING:
            out.append(ReasoningNode(content=piece))
        elif i == 0:
            out.append(
                TextNode(id=node.id, extra=dict(node.extra), role=node.role, content=piece, phase=node.phase)
            )
        else:
            out.append(TextNode(role=node.role, content=piece, phase=node.phase))
    return out


def _is_assistant_text(node: Node) -> TypeGuard[TextNode]:
    return type(node) is TextNode and node.role == "assistant"


@dataclass(slots=True)
class _Split:
    """One upstream assistant text node being cut into pieces."""

    header: TextNode
    inside: bool = False
    pending: str = ""
    tagged: bool = False
    kind: str | None = None  # kind of the open piece
    index: int | None = None  # output index of the open piece
    node: Node | None = None  # the open piece, accumulated
    pieces: list[int] = field(default_factory=list)  # output indices of every piece
    # A tag was seen since the open piece's last text: more text starts a new piece even of the
    # same kind, as in the whole-response rule (the text after an empty block is a new text node,
    # two blocks are two reasoning nodes). Closed lazily, so the last piece still gets the
    # upstream node's ``NodeDone`` extras.
    cut: bool = False


@dataclass(slots=True)
class _State:
    next: int = 0
    remap: dict[int, int] = field(default_factory=dict)  # passthrough upstream index -> output index
    splits: dict[int, _Split] = field(default_factory=dict)
    final: dict[int, Node] = field(default_factory=dict)  # output index -> completed piece

    def allocate(self) -> int:
        index = self.next
        self.next += 1
        return index


class ReasoningFromThinkXml(Transform):
    type_id = "reasoning_from_think_xml"
    category = "reasoning"
    name = {"en": "Reasoning: from think XML", "zh": "推理：从 think XML 提取"}
    description = {
        "en": "Turns <tag>…</tag> blocks in assistant text into reasoning nodes, also while streaming "
        "(tags split across deltas are found; partial tags are never shown as text).",
        "zh": "将助手文本中的 <tag>…</tag> 块转换为推理节点，流式响应同样适用（能识别跨分片的标签，"
        "不会把不完整的标签当作文本输出）。",
    }
    phases = ("response",)
    scopes = ("provider", "global", "api_key")
    aliases = ("think_xml_to_reasoning",)
    config_schema = TAG_SCHEMA
    examples = (
        TransformExample(
            title="A think block before the answer becomes reasoning",
            phase="response",
            protocol="chat_completion",
            config={"tag": "think"},
            input={
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "created": 1,
                "model": "r1",
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "stop",
                        "message": {"role": "assistant", "content": "<think>abc</think>Hello"},
                    }
                ],
            },
            expected={
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "stop",
                        "message": {
                            "role": "assistant",
                            "content": "Hello",
                            "reasoning": "abc",
                            "reasoning_details": [{"type": "reasoning.text", "text": "abc", "index": 0}],
                        },
                    }
                ]
            },
        ),
        TransformExample(
            title="An unclosed tag makes the rest reasoning",
            phase="response",
            protocol="chat_completion",
            config={"tag": "think"},
            input={
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "created": 1,
                "model": "r1",
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "stop",
                        "message": {"role": "assistant", "content": "Hi <think>x"},
                    }
                ],
            },
            expected={
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "stop",
                        "message": {
                            "role": "assistant",
                            "content": "Hi ",
                            "reasoning": "x",
                            "reasoning_details": [{"type": "reasoning.text", "text": "x", "index": 0}],
                        },
                    }
                ]
            },
        ),
    )

    def setup(self) -> None:
        self.tag: str = self.config["tag"]
        self.open_tag = f"<{self.tag}>"
        self.close_tag = f"</{self.tag}>"

    # -- whole responses ---------------------------------------------------------------------
    def rewrite(self, nodes: list[Node]) -> list[Node]:
        out: list[Node] = []
        for node in nodes:
            if _is_assistant_text(node):
                out.extend(split_node(node, self.tag))
            else:
                out.append(node)
        return out

    def apply_response(self, resp: Response, ctx: TransformContext) -> None:
        resp.output = self.rewrite(resp.output)

    # -- streams -----------------------------------------------------------------------------
    def new_stream_state(self, ctx: TransformContext) -> _State:
        return _State()

    def apply_event(self, event: Event, state: _State, ctx: TransformContext) -> list[Event]:
        if isinstance(event, NodeStart):
            if _is_assistant_text(event.node):
                state.splits[event.index] = _Split(header=copy(event.node))
                return []  # a piece starts when its first character is known
            new = state.allocate()
            state.remap[event.index] = new
            return [replace(event, index=new)]
        if isinstance(event, NodeDelta):
            split = state.splits.get(event.index)
            if split is not None:
                return self._delta(split, event, state)
            mapped = state.remap.get(event.index)
            return [event] if mapped is None else [replace(event, index=mapped)]
        if isinstance(event, NodeDone):
            split = state.splits.get(event.index)
            if split is not None:
                return self._done(split, event.node, state, event.extra)
            done_index = state.remap.get(event.index)
            if done_index is None:  # done without start: allocate like a start would have
                done_index = state.remap[event.index] = state.allocate()
            new = done_index
            state.final[new] = event.node
            return [replace(event, index=new)]
        if isinstance(event, ResponseDone):
            return self._response_done(event, state)
        return [event]

    def _delta(self, split: _Split, event: NodeDelta, state: _State) -> list[Event]:
        out: list[Event] = []
        if event.kind == ev.TEXT:
            self._scan(split, split.pending + event.delta, state, out)
        if event.extra:
            first = out[0] if out else None
            if isinstance(first, NodeStart | NodeDelta):
                first.extra = {**event.extra, **first.extra}
            elif split.index is not None:
                out.append(
                    NodeDelta(
                        index=split.index,
                        kind=self._delta_kind(split.kind),
                        delta="",
                        extra=dict(event.extra),
                    )
                )
        return out

    def _scan(self, split: _Split, text: str, state: _State, out: list[Event]) -> None:
        """Emit what ``text`` decides; keep a possible partial tag in ``split.pending``."""
        split.pending = ""
        while text:
            tag = self.close_tag if split.inside else self.open_tag
            pos = text.find(tag)
            if pos >= 0:
                self._emit(split, REASONING if split.inside else TEXT, text[:pos], state, out)
                split.inside = not split.inside
                split.cut = True
                split.tagged = True
                text = text[pos + len(tag) :]
                continue
            hold = _partial_tail(text, tag)
            self._emit(split, REASONING if split.inside else TEXT, text[: len(text) - hold], state, out)
            split.pending = text[len(text) - hold :]
            return

    def _emit(self, split: _Split, kind: str, text: str, state: _State, out: list[Event]) -> None:
        if not text:
            return
        if split.kind != kind or split.cut:
            split.cut = False
            self._close_piece(split, state, out)
            split.kind = kind
            split.index = state.allocate()
            split.pieces.append(split.index)
            if kind == REASONING:
                header: Node = ReasoningNode()
                split.node = ReasoningNode(content="")
            elif not split.pieces[:-1]:  # the first piece is the original node
                header = copy(split.header)
                split.node = copy(split.header)
            else:
                header = TextNode(role=split.header.role, phase=split.header.phase)
                split.node = TextNode(role=split.header.role, phase=split.header.phase)
            out.append(NodeStart(index=split.index, node=header))
        node, index = split.node, split.index
        if isinstance(node, TextNode | ReasoningNode) and index is not None:
            node.content = (node.content or "") + text
            out.append(NodeDelta(index=index, kind=self._delta_kind(kind), delta=text))

    @staticmethod
    def _delta_kind(kind: str | None) -> str:
        return ev.REASONING_CONTENT if kind == REASONING else ev.TEXT

    def _close_piece(
        self, split: _Split, state: _State, out: list[Event], extra: dict[str, Any] | None = None
    ) -> None:
        if split.index is None or split.node is None:
            return
        state.final[split.index] = split.node
        out.append(NodeDone(index=split.index, node=split.node, extra=dict(extra or {})))
        split.kind = split.index = split.node = None

    def _done(self, split: _Split, node: Node, state: _State, extra: dict[str, Any]) -> list[Event]:
        out: list[Event] = []
        if split.pending:
            pending, split.pending = split.pending, ""
            self._emit(split, REASONING if split.inside else TEXT, pending, state, out)
        if not split.tagged:
            # No tag at all: the node is the upstream's own, complete node.
            if split.index is None:
                split.index = state.allocate()
                split.pieces.append(split.index)
                out.append(NodeStart(index=split.index, node=copy(split.header)))
            state.final[split.index] = node
            out.append(NodeDone(index=split.index, node=node, extra=dict(extra)))
            split.kind = split.index = split.node = None
        else:
            self._close_piece(split, state, out, extra)
        return out

    def _response_done(self, event: ResponseDone, state: _State) -> list[Event]:
        out: list[Event] = []
        for split in state.splits.values():
            if split.index is not None or split.pending:  # never completed: close what streamed
                node = split.node if split.node is not None and not split.tagged else copy(split.header)
                out.extend(self._done(split, node, state, {}))
        result: dict[int, Node] = {}
        for i, node in enumerate(event.output):
            found = state.splits.get(i)
            if found is not None and found.pieces:
                split = found
                if split.tagged:
                    for index in split.pieces:
                        result[index] = state.final[index]
                else:
                    result[split.pieces[0]] = node
            elif i in state.remap:
                result[state.remap[i]] = node
            else:  # in the terminal output only: rewrite as a whole response would
                for piece in self.rewrite([node]):
                    result[state.allocate()] = piece
        event.output = [result[k] for k in sorted(result)]
        out.append(event)
        return out


def _partial_tail(text: str, tag: str) -> int:
    """Length of the longest proper suffix of ``text`` that is a prefix of ``tag``."""
    start = max(0, len(text) - len(tag) + 1)
    pos = text.find("<", start)
    while pos >= 0:
        if tag.startswith(text[pos:]):
            return len(text) - pos
        pos = text.find("<", pos + 1)
    return 0
