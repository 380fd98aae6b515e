"""reasoning_to_think_xml: plaintext reasoning becomes ``<think>…</think>`` assistant text, for
clients that only render text (many chat front ends show the tags as a collapsible block).

Whole responses
    Every reasoning node whose ``content`` is present (even empty) is replaced by an assistant
    text node ``<tag>`` + content + ``</tag>`` with no id and no extras. Reasoning without
    content (summary-only, e.g. Anthropic thinking, or encrypted-only) stays reasoning.

Streams (improved over the reference, which wrapped every fragment in its own tags and left the
terminal state unrewritten)
    A reasoning node's start is held until its first delta says what it is: a content delta
    makes it a text node that streams ``<tag>`` + the fragments, and ``</tag>`` when the node
    completes or as soon as another node streams (Chat upstreams keep reasoning open while the
    answer streams; the tag must close before the answer's text); any other first delta (summary, encrypted) keeps it reasoning, streamed unchanged.
    ``NodeDone.node`` and ``ResponseDone.output`` follow that decision, so an SDK's stream
    accumulator ends with the whole-response result. The text node gets no id, like the
    whole-response rule (a reasoning item id is not a message id).

    Limitation: a node whose summary streams before its content stays reasoning in a stream while
    the whole-response rule turns it into text (no common upstream streams reasoning that way).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gateway.urp import ReasoningNode, Response, TextNode
from gateway.urp import events as ev
from gateway.urp.events import Event, NodeDelta, NodeDone, NodeStart, ResponseDone
from gateway.urp.nodes import Node
from transforms.base import Transform, TransformContext, TransformExample
from transforms.lib.reasoning_helpers import TAG_SCHEMA, drop_reasoning_scalars


@dataclass(slots=True)
class _State:
    held: dict[int, NodeStart] = field(default_factory=dict)  # reasoning starts not yet decided
    as_text: set[int] = field(default_factory=set)
    as_reasoning: set[int] = field(default_factory=set)
    open_tag: set[int] = field(default_factory=set)  # text-mode nodes whose closing tag is not sent yet


class ReasoningToThinkXml(Transform):
    type_id = "reasoning_to_think_xml"
    category = "reasoning"
    name = {"en": "Reasoning: to think XML", "zh": "推理：转为 think XML"}
    description = {
        "en": "Replaces plaintext reasoning with assistant text wrapped in <tag>…</tag>, for clients that "
        "only show text. Summary-only and encrypted-only reasoning is kept.",
        "zh": "将明文推理替换为用 <tag>…</tag> 包裹的助手文本，适用于只显示文本的客户端。"
        "仅含摘要或仅含加密内容的推理保持不变。",
    }
    phases = ("response",)
    aliases = ()
    config_schema = TAG_SCHEMA
    examples = (
        TransformExample(
            title="Plaintext reasoning becomes tagged text",
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
                        "message": {"role": "assistant", "content": "Hello", "reasoning_content": "abc"},
                    }
                ],
            },
            expected={
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "stop",
                        "message": {"role": "assistant", "content": "<think>abc</think>\n\nHello"},
                    }
                ]
            },
            note={
                "en": "Chat joins the two text nodes of one message with a blank line.",
                "zh": "Chat 协议用空行连接同一消息中的两个文本节点。",
            },
        ),
        TransformExample(
            title="Summary-only reasoning (Anthropic thinking) is kept",
            phase="response",
            protocol="messages",
            config={"tag": "think"},
            input={
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": "claude",
                "stop_reason": "end_turn",
                "stop_sequence": None,
                "usage": {"input_tokens": 1, "output_tokens": 1},
                "content": [
                    {"type": "thinking", "thinking": "s", "signature": "sig"},
                    {"type": "text", "text": "Hi"},
                ],
            },
            expected={
                "content": [
                    {"type": "thinking", "thinking": "s", "signature": "sig"},
                    {"type": "text", "text": "Hi"},
                ]
            },
        ),
    )

    def setup(self) -> None:
        self.open_tag = f"<{self.config['tag']}>"
        self.close_tag = f"</{self.config['tag']}>"

    def convert(self, node: Node) -> Node:
        if type(node) is ReasoningNode and node.content is not None:
            return TextNode(role="assistant", content=f"{self.open_tag}{node.content}{self.close_tag}")
        return node

    @staticmethod
    def _text(node: Node) -> str:
        return node.content if isinstance(node, TextNode) else ""

    def apply_response(self, resp: Response, ctx: TransformContext) -> None:
        resp.output = [self.convert(n) for n in resp.output]
        drop_reasoning_scalars(resp.output)

    def new_stream_state(self, ctx: TransformContext) -> _State:
        return _State()

    def apply_event(self, event: Event, state: _State, ctx: TransformContext) -> list[Event]:
        if state.open_tag and isinstance(event, NodeStart | NodeDelta) and event.index not in state.open_tag:
            # Another node streams while a converted node is open (Chat upstreams keep reasoning
            # open until the end): close the tag now so the text reads in order.
            closes: list[Event] = [
                NodeDelta(index=i, kind=ev.TEXT, delta=self.close_tag) for i in sorted(state.open_tag)
            ]
            state.open_tag.clear()
            return closes + self._event(event, state)
        return self._event(event, state)

    def _event(self, event: Event, state: _State) -> list[Event]:
        if isinstance(event, NodeStart):
            if type(event.node) is ReasoningNode:
                state.held[event.index] = event
                return []
            return [event]
        if isinstance(event, NodeDelta):
            return self._delta(event, state)
        if isinstance(event, NodeDone):
            return self._done(event, state)
        if isinstance(event, ResponseDone):
            return self._response_done(event, state)
        return [event]

    def _delta(self, event: NodeDelta, state: _State) -> list[Event]:
        index = event.index
        held = state.held.pop(index, None)
        if held is not None:
            if event.kind == ev.REASONING_CONTENT:
                state.as_text.add(index)
                state.open_tag.add(index)
                event.kind = ev.TEXT
                event.delta = self.open_tag + event.delta
                return [NodeStart(index=index, node=TextNode(role="assistant"), extra=held.extra), event]
            state.as_reasoning.add(index)
            return [held, event]
        if index in state.as_text:
            if event.kind != ev.REASONING_CONTENT:
                return (
                    [NodeDelta(index=index, kind=ev.TEXT, delta="", extra=event.extra)] if event.extra else []
                )
            event.kind = ev.TEXT
            if index not in state.open_tag and event.delta:  # more thought after the tag was closed
                event.delta = f"{self.open_tag}{event.delta}{self.close_tag}"
        return [event]

    def _done(self, event: NodeDone, state: _State) -> list[Event]:
        index = event.index
        held = state.held.pop(index, None)
        if held is not None:  # no delta: decide from the complete node
            converted = self.convert(event.node)
            if converted is event.node:
                state.as_reasoning.add(index)
                return [held, event]
            state.as_text.add(index)
            event.node = converted
            return [
                NodeStart(index=index, node=TextNode(role="assistant"), extra=held.extra),
                NodeDelta(index=index, kind=ev.TEXT, delta=self._text(event.node)),
                event,
            ]
        if index in state.as_text:
            node = event.node
            content = node.content if type(node) is ReasoningNode else None
            event.node = TextNode(role="assistant", content=f"{self.open_tag}{content or ''}{self.close_tag}")
            if index in state.open_tag:
                state.open_tag.discard(index)
                return [NodeDelta(index=index, kind=ev.TEXT, delta=self.close_tag), event]
        return [event]

    def _response_done(self, event: ResponseDone, state: _State) -> list[Event]:
        out: list[Event] = []
        for index, held in list(state.held.items()):  # started, never completed
            state.as_reasoning.add(index)
            out.append(held)
        state.held.clear()
        output = []
        for i, node in enumerate(event.output):
            if i in state.as_text and type(node) is ReasoningNode:
                node = TextNode(
                    role="assistant", content=f"{self.open_tag}{node.content or ''}{self.close_tag}"
                )
            elif i not in state.as_reasoning:
                node = self.convert(node)
            output.append(node)
        event.output = output
        drop_reasoning_scalars(output)
        out.append(event)
        return out
