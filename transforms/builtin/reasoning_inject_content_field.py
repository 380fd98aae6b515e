"""reasoning_inject_content_field: Chat Completions clients also get the reasoning text as
``reasoning_content`` (the DeepSeek/OpenRouter field many front ends read), next to the normal
reasoning fields, which stay.

The value is the node's non-empty plaintext ``content``, else its non-empty ``summary``; an
encrypted payload never contributes, so encrypted-only reasoning gets nothing. The rule only
marks nodes and deltas (``INJECT_REASONING_CONTENT``, internal, never on the wire); the Chat
Completions encoders read the mark, other client protocols ignore it. Independent of
reasoning_summary_to_raw_cot; both may be on.

Streams: each reasoning content delta is marked, and a summary delta is marked while its node has
streamed no content (the whole-response value prefers content), so the streamed
``reasoning_content`` concatenates to the whole-response value.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gateway.urp import ReasoningNode, Response
from gateway.urp import events as ev
from gateway.urp.events import Event, NodeDelta, NodeDone, ResponseDone
from gateway.urp.nodes import Node
from gateway.urp.presentation import INJECT_REASONING_CONTENT
from transforms.base import Transform, TransformContext, TransformExample
from transforms.lib.reasoning_helpers import NO_CONFIG


def mark(node: Node) -> None:
    if type(node) is ReasoningNode and (node.content or node.summary):
        node.extra[INJECT_REASONING_CONTENT] = True


@dataclass(slots=True)
class _State:
    with_content: set[int] = field(default_factory=set)


class ReasoningInjectContentField(Transform):
    type_id = "reasoning_inject_content_field"
    category = "reasoning"
    name = {"en": "Reasoning: inject reasoning_content field", "zh": "推理：注入 reasoning_content 字段"}
    description = {
        "en": "Chat Completions clients also receive the reasoning text as reasoning_content "
        "(DeepSeek/OpenRouter convention); the normal reasoning fields stay.",
        "zh": "Chat Completions 客户端额外收到 reasoning_content 字段（DeepSeek/OpenRouter 约定）中的推理文本；"
        "原有推理字段保留。",
    }
    phases = ("response",)
    aliases = ("reasoning_content_delta",)
    config_schema = NO_CONFIG
    examples = (
        TransformExample(
            title="A Chat message gets reasoning_content",
            phase="response",
            protocol="chat_completion",
            input={
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "created": 1,
                "model": "r1",
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "stop",
                        "message": {
                            "role": "assistant",
                            "content": "Hi",
                            "reasoning_details": [
                                {"type": "reasoning.text", "text": "plain_resp", "index": 0}
                            ],
                        },
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
                            "content": "Hi",
                            "reasoning_content": "plain_resp",
                            "reasoning_details": [
                                {"type": "reasoning.text", "text": "plain_resp", "index": 0}
                            ],
                        },
                    }
                ]
            },
        ),
    )

    def apply_response(self, resp: Response, ctx: TransformContext) -> None:
        for node in resp.output:
            mark(node)

    def new_stream_state(self, ctx: TransformContext) -> _State:
        return _State()

    def apply_event(self, event: Event, state: _State, ctx: TransformContext) -> list[Event]:
        if isinstance(event, NodeDelta):
            if event.kind == ev.REASONING_CONTENT and event.delta:
                state.with_content.add(event.index)
                event.extra[INJECT_REASONING_CONTENT] = True
            elif event.kind == ev.REASONING_SUMMARY and event.delta and event.index not in state.with_content:
                event.extra[INJECT_REASONING_CONTENT] = True
        elif isinstance(event, NodeDone):
            mark(event.node)
        elif isinstance(event, ResponseDone):
            for node in event.output:
                mark(node)
        return [event]
