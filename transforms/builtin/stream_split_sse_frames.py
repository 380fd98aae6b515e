"""``stream_split_sse_frames``: cap the length of the SSE ``data:`` lines sent to the client.

The rule's own apply step does nothing. Before a client stream starts, the runtime asks
``gateway.protocols.frame_split.effective_max_frame_length`` for the limit: the first enabled,
model-matching response rule with this id in the provider chain, then the global chain, then the
API-key chain (first match wins, unlike ordinary later-rule-wins semantics). A ``FrameSplitter``
then cuts oversized delta frames written by the client's stream encoder into several frames of
the same kind (see that module). Non-stream responses are unaffected and the rule never forces
buffered mode.
"""

from __future__ import annotations

from gateway.protocols.frame_split import DEFAULT_MAX_FRAME_LENGTH
from transforms.base import ALL_SCOPES, Transform


class StreamSplitSseFrames(Transform):
    type_id = "stream_split_sse_frames"
    aliases = ("split_sse_frames",)
    category = "stream"
    name = {"en": "Stream: split oversized SSE frames", "zh": "流式：拆分超长 SSE 帧"}
    description = {
        "en": "Split streamed delta events whose SSE data line is longer than a limit into several events of the "
              "same kind whose text concatenates to the original.",
        "zh": "将 SSE data 行超过限制长度的流式增量事件拆分为多个同类事件，拼接后与原文本一致。",
    }
    phases = ("response",)
    scopes = ALL_SCOPES
    config_schema = {
        "type": "object",
        "properties": {
            "max_frame_length": {
                "type": "integer",
                "minimum": 1,
                "default": DEFAULT_MAX_FRAME_LENGTH,
                "title": "Max frame length (bytes)",
                "description": "Longest allowed `data: ` line, measured on the escaped JSON.",
            },
        },
    }
