"""prompt_strip_orphaned_tool_calls: drop tool calls that never got a result (for example after
client-side truncation); Anthropic rejects a tool_use without a matching tool_result."""

from __future__ import annotations

from gateway.urp import Request
from gateway.urp.conversation import remove_orphan_tool_exchanges
from transforms.base import ALL_SCOPES, Transform, TransformContext, TransformExample


class PromptStripOrphanedToolCalls(Transform):
    """Removes every tool call whose ``call_id`` has no tool result anywhere in the input, even
    a trailing call the conversation is still waiting on (the per-attempt clean-up keeps those).
    Tool results are never removed (an orphan result stays); every other node, control nodes
    included, is untouched. Reuses the codec layer's orphan filter."""

    type_id = "prompt_strip_orphaned_tool_calls"
    aliases = ("strip_orphaned_tool_use",)
    category = "prompt"
    name = {"en": "Prompt: strip orphaned tool calls", "zh": "提示词：移除孤立的工具调用"}
    description = {
        "en": "Removes assistant tool calls that have no matching tool result in the conversation.",
        "zh": "移除对话中没有对应工具结果的助手工具调用。",
    }
    phases = ("request",)
    scopes = ALL_SCOPES
    config_schema = {"type": "object", "properties": {}}

    examples = (
        TransformExample(
            title="A tool call without a result is removed",
            phase="request",
            input={
                "model": "gpt-4o",
                "messages": [
                    {"role": "user", "content": "list and read"},
                    {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}},
                            {"id": "c2", "type": "function", "function": {"name": "cat", "arguments": "{}"}},
                        ],
                    },
                    {"role": "tool", "tool_call_id": "c1", "content": "a.txt"},
                ],
            },
            expected={
                "messages": [
                    {"role": "user", "content": "list and read"},
                    {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}},
                        ],
                    },
                    {"role": "tool", "tool_call_id": "c1", "content": "a.txt"},
                ]
            },
        ),
        TransformExample(
            title="An orphan tool result stays",
            phase="request",
            input={
                "model": "gpt-4o",
                "messages": [
                    {"role": "tool", "tool_call_id": "x", "content": "r"},
                    {"role": "user", "content": "hi"},
                ],
            },
            expected={
                "messages": [
                    {"role": "tool", "tool_call_id": "x", "content": "r"},
                    {"role": "user", "content": "hi"},
                ]
            },
        ),
    )

    def apply_request(self, req: Request, ctx: TransformContext) -> None:
        req.input = remove_orphan_tool_exchanges(
            req.input, calls=True, results=False, keep_pending_calls=False
        )
