"""reasoning_strip_input: drop replayed reasoning from the request history, for upstreams that
reject reasoning items they did not produce (or any at all)."""

from __future__ import annotations

from gateway.urp import ReasoningNode, Request
from transforms.base import Transform, TransformContext, TransformExample
from transforms.lib.reasoning_helpers import NO_CONFIG


class ReasoningStripInput(Transform):
    """Removes every reasoning node from ``request.input``; every other node keeps its order."""

    type_id = "reasoning_strip_input"
    category = "reasoning"
    name = {"en": "Reasoning: strip from request input", "zh": "推理：从请求输入中移除"}
    description = {
        "en": "Removes every reasoning item from the conversation history sent upstream.",
        "zh": "从发往上游的对话历史中移除所有推理条目。",
    }
    phases = ("request",)
    aliases = ("strip_input_reasoning",)
    config_schema = NO_CONFIG
    examples = (
        TransformExample(
            title="A replayed reasoning item is removed",
            phase="request",
            protocol="responses",
            input={
                "model": "o3",
                "input": [
                    {"type": "message", "role": "user", "content": "hi"},
                    {
                        "type": "reasoning",
                        "id": "rs_1",
                        "summary": [{"type": "summary_text", "text": "s"}],
                        "encrypted_content": "enc",
                    },
                    {"type": "message", "role": "assistant", "content": "hello"},
                    {"type": "message", "role": "user", "content": "again"},
                ],
            },
            expected={
                "input": [
                    {"type": "message", "role": "user", "content": "hi"},
                    {"type": "message", "role": "assistant", "content": "hello"},
                    {"type": "message", "role": "user", "content": "again"},
                ]
            },
        ),
    )

    def apply_request(self, req: Request, ctx: TransformContext) -> None:
        req.input = [n for n in req.input if type(n) is not ReasoningNode]
