"""``stream_split_sse_frames``: cap the length of the SSE ``data:`` lines sent to the client.

The rule's event and whole-response steps do nothing. It uses the stream-encoder hook: before a
client stream starts (native or synthesised from a whole response), the runtime lets response
rules wrap the client's encoder, one wrapper per transform type from the first matching rule in
execution order (provider chain, then global, then API key: first match wins, as the reference
does, unlike ordinary later-rule-wins semantics). This rule wraps it in a ``SplittingEncoder``
whose ``FrameSplitter`` cuts oversized delta frames into several frames of the same kind (see
``transforms.lib.sse_frame_split``). Non-stream responses are unaffected and the rule never forces
buffered mode.
"""

from __future__ import annotations

from typing import Any

from transforms.base import ALL_SCOPES, Transform, TransformContext, TransformExample
from transforms.lib.sse_frame_split import DEFAULT_MAX_FRAME_LENGTH, FrameSplitter, SplittingEncoder


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

    examples = (
        TransformExample(
            title="A whole (non-stream) response is not changed",
            phase="response",
            config={"max_frame_length": 120},
            input={
                "id": "c1",
                "object": "chat.completion",
                "created": 1,
                "model": "gpt-4o",
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": "x" * 300},
                        "finish_reason": "stop",
                    }
                ],
            },
            expected={
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": "x" * 300},
                        "finish_reason": "stop",
                    }
                ]
            },
            note={
                "en": "In a stream, a delta whose data: line exceeds 120 bytes (escaped JSON) is sent as several "
                "chunks of the same kind whose texts concatenate to the original.",
                "zh": "流式响应中，data: 行（按转义后的 JSON 计算）超过 120 字节的增量会被拆成多个同类分片，拼接后与原文一致。",
            },
        ),
    )

    def setup(self) -> None:
        value = self.config.get("max_frame_length")
        self.limit: int = DEFAULT_MAX_FRAME_LENGTH
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            self.limit = value

    def wrap_stream_encoder(self, encoder: Any, ctx: TransformContext) -> Any:
        """Every frame the client's encoder writes goes through a :class:`FrameSplitter` for
        the client's protocol (native and synthesised streams alike)."""
        return SplittingEncoder(encoder, FrameSplitter(ctx.client_protocol, self.limit))
