"""reasoning_strip_encrypted: remove opaque reasoning payloads (encrypted content, thinking
signatures) from responses. Motivation: SSE clients with a per-line buffer limit (~128 KiB) choke
on ``response.output_item.done`` / ``response.completed`` lines carrying large encrypted blobs;
clients that never replay reasoning do not need them.

Clears ``encrypted`` of every reasoning node (also its ``encrypted_content`` extra), the
``encrypted_content`` of control nodes carrying reasoning state, and tool-call signatures (Gemini
``thoughtSignature``), keeping content, summary, source, arguments and every other extra. Works
the same on ``mz2.`` envelopes and raw upstream values. Streams: encrypted deltas are dropped,
headers, ``NodeDone.node`` and ``ResponseDone.output`` are cleaned the same way. Requests are
never touched (replayed encrypted reasoning is handled by the envelope logic).
"""

from __future__ import annotations

from gateway.protocols.gemini.common import SIGNATURE as GEMINI_SIGNATURE
from gateway.urp import EnvelopeExtraNode, ReasoningNode, Response, ToolCallNode
from gateway.urp import events as ev
from gateway.urp.events import Event, NodeDelta, NodeDone, NodeStart, ResponseDone
from gateway.urp.nodes import Node
from transforms.base import Transform, TransformContext, TransformExample
from transforms.lib.reasoning_helpers import NO_CONFIG

ENCRYPTED_EXTRA = "encrypted_content"


def strip_node(node: Node) -> None:
    if isinstance(node, ReasoningNode):
        node.encrypted = None
        node.extra.pop(ENCRYPTED_EXTRA, None)
    elif isinstance(node, ToolCallNode):
        node.extra.pop(GEMINI_SIGNATURE, None)
    elif isinstance(node, EnvelopeExtraNode) and (
        ENCRYPTED_EXTRA in node.extra or node.extra.get("type") == "reasoning"
    ):
        node.extra.pop(ENCRYPTED_EXTRA, None)


class ReasoningStripEncrypted(Transform):
    type_id = "reasoning_strip_encrypted"
    category = "reasoning"
    name = {"en": "Reasoning: strip encrypted payloads", "zh": "推理：移除加密内容"}
    description = {
        "en": "Removes encrypted reasoning content and thinking/tool-call signatures from responses "
        "(plaintext reasoning and summaries stay), for clients that never replay them.",
        "zh": "从响应中移除加密推理内容以及思考/工具调用签名（明文推理和摘要保留），适用于从不回放它们的客户端。",
    }
    phases = ("response",)
    aliases = ("strip_encrypted_reasoning",)
    config_schema = NO_CONFIG
    examples = (
        TransformExample(
            title="The encrypted payload goes, the summary stays",
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
                        "encrypted_content": "mz2.aaa",
                        "summary": [{"type": "summary_text", "text": "summary"}],
                    }
                ],
            },
            expected={
                "output": [
                    {
                        "type": "reasoning",
                        "id": "rs_1",
                        "summary": [{"type": "summary_text", "text": "summary"}],
                    }
                ]
            },
        ),
    )

    def apply_response(self, resp: Response, ctx: TransformContext) -> None:
        for node in resp.output:
            strip_node(node)

    def apply_event(self, event: Event, state: None, ctx: TransformContext) -> list[Event]:
        if isinstance(event, NodeDelta):
            return [] if event.kind == ev.REASONING_ENCRYPTED else [event]
        if isinstance(event, NodeStart):
            strip_node(event.node)
            if type(event.node) is not ToolCallNode:
                event.extra.pop(ENCRYPTED_EXTRA, None)
        elif isinstance(event, NodeDone):
            strip_node(event.node)
        elif isinstance(event, ResponseDone):
            for node in event.output:
                strip_node(node)
        return [event]
