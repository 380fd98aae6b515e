"""reasoning_summary_to_raw_cot: Chat Completions clients get reasoning summaries as
``reasoning_content`` (what OpenWebUI and similar front ends render as the raw chain of thought)
instead of as ``reasoning.summary`` details.

The rule only marks reasoning nodes and deltas that carry a non-empty summary
(``SUMMARY_AS_CHAT_CONTENT``, internal, never on the wire); it never changes content, summary or
encrypted payloads, and canonical data still calls it a summary. Only the Chat Completions
encoders read the mark: a marked summary is written as ``reasoning_content`` and not as a
summary detail (plaintext content and encrypted payloads keep their own fields). Other client
protocols are unaffected.
"""

from __future__ import annotations

from gateway.urp import ReasoningNode, Response
from gateway.urp import events as ev
from gateway.urp.events import Event, NodeDelta, NodeDone, ResponseDone
from gateway.urp.nodes import Node
from gateway.urp.presentation import SUMMARY_AS_CHAT_CONTENT
from transforms.base import Transform, TransformContext, TransformExample
from transforms.lib.reasoning_helpers import NO_CONFIG


def mark(node: Node) -> None:
    if type(node) is ReasoningNode and node.summary:
        node.extra[SUMMARY_AS_CHAT_CONTENT] = True


class ReasoningSummaryToRawCot(Transform):
    type_id = "reasoning_summary_to_raw_cot"
    category = "reasoning"
    name = {"en": "Reasoning: summary to raw CoT", "zh": "推理：摘要作为原始思维链"}
    description = {
        "en": "Chat Completions clients receive reasoning summaries as reasoning_content, which front ends "
        "such as OpenWebUI show as the model's thinking.",
        "zh": "Chat Completions 客户端以 reasoning_content 字段收到推理摘要，OpenWebUI 等前端会将其显示为模型的思考过程。",
    }
    phases = ("response",)
    config_schema = NO_CONFIG
    examples = (
        TransformExample(
            title="An Anthropic thinking summary reaches a Chat client as reasoning_content",
            phase="response",
            protocol="chat_completion",
            input={
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "created": 1,
                "model": "m",
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "stop",
                        "message": {
                            "role": "assistant",
                            "content": "Hi",
                            "reasoning_details": [
                                {"type": "reasoning.summary", "summary": "brief summary", "index": 0}
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
                            "reasoning_content": "brief summary",
                        },
                    }
                ]
            },
        ),
    )

    def apply_response(self, resp: Response, ctx: TransformContext) -> None:
        for node in resp.output:
            mark(node)

    def apply_event(self, event: Event, state: None, ctx: TransformContext) -> list[Event]:
        if isinstance(event, NodeDelta):
            if event.kind == ev.REASONING_SUMMARY and event.delta:
                event.extra[SUMMARY_AS_CHAT_CONTENT] = True
        elif isinstance(event, NodeDone):
            mark(event.node)
        elif isinstance(event, ResponseDone):
            for node in event.output:
                mark(node)
        return [event]
