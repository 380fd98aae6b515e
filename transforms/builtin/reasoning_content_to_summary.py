"""reasoning_content_to_summary: plaintext chain of thought is presented as a reasoning summary,
for clients that only render summaries (Responses clients such as Codex show ``summary`` and
ignore ``reasoning_text`` content).

Every reasoning node with non-empty ``content`` gets it as its ``summary`` (replacing any summary)
and loses ``content``; an empty-string content is just cleared. Encrypted payload, source, id and
extras stay. The node (and, in streams, each moved delta) is marked ``SUMMARY_AS_THINKING``, an
internal marker that is never written on the wire. Streams: content deltas become summary deltas
on the same node, ``NodeDone.node`` and ``ResponseDone.output`` are moved the same way, so the
lifecycle stays valid and SDK accumulators end with the whole-response result.

Limitation: a node that streams both a summary and content gets both appended to its summary in a
stream, where the whole-response rule keeps only the content (no common upstream sends both).
"""

from __future__ import annotations

from gateway.urp import ReasoningNode, Response
from gateway.urp import events as ev
from gateway.urp.events import Event, NodeDelta, NodeDone, ResponseDone
from gateway.urp.nodes import Node
from gateway.urp.presentation import SUMMARY_AS_THINKING
from transforms.base import Transform, TransformContext, TransformExample
from transforms.lib.reasoning_helpers import NO_CONFIG


def move(node: Node) -> None:
    if type(node) is not ReasoningNode or node.content is None:
        return
    if node.content:
        node.summary = node.content
        node.extra[SUMMARY_AS_THINKING] = True
    node.content = None


class ReasoningContentToSummary(Transform):
    type_id = "reasoning_content_to_summary"
    category = "reasoning"
    name = {"en": "Reasoning: content to summary", "zh": "推理：明文转为摘要"}
    description = {
        "en": "Presents plaintext reasoning as a reasoning summary, for clients that only show summaries.",
        "zh": "将明文推理作为推理摘要呈现，适用于只显示摘要的客户端。",
    }
    phases = ("response",)
    aliases = ("plaintext_reasoning_to_summary",)
    config_schema = NO_CONFIG
    examples = (
        TransformExample(
            title="Raw chain of thought becomes a summary",
            phase="response",
            protocol="responses",
            input={
                "id": "resp_1",
                "object": "response",
                "created_at": 1,
                "model": "r1",
                "status": "completed",
                "output": [
                    {
                        "type": "reasoning",
                        "id": "rs_1",
                        "summary": [],
                        "content": [{"type": "reasoning_text", "text": "plain reasoning"}],
                    }
                ],
            },
            expected={
                "output": [
                    {
                        "type": "reasoning",
                        "id": "rs_1",
                        "summary": [{"type": "summary_text", "text": "plain reasoning"}],
                        "content": [],
                    }
                ]
            },
        ),
    )

    def apply_response(self, resp: Response, ctx: TransformContext) -> None:
        for node in resp.output:
            move(node)

    def apply_event(self, event: Event, state: None, ctx: TransformContext) -> list[Event]:
        if isinstance(event, NodeDelta):
            if event.kind == ev.REASONING_CONTENT:
                event.kind = ev.REASONING_SUMMARY
                event.extra[SUMMARY_AS_THINKING] = True
        elif isinstance(event, NodeDone):
            move(event.node)
        elif isinstance(event, ResponseDone):
            for node in event.output:
                move(node)
        return [event]
