"""prompt_append_empty_user: end the conversation on a user turn, for upstreams that reject an
assistant prefill."""

from __future__ import annotations

from gateway.urp import Request, TextNode
from transforms.base import ALL_SCOPES, Transform, TransformContext, TransformExample
from transforms.lib.role_helpers import node_role


class PromptAppendEmptyUser(Transform):
    """When the last input node speaks as the assistant, append one user text node.

    "Speaks as the assistant" is the primer's role of a node: assistant text/image/audio/file/
    provider items, and also refusals, reasoning and tool calls. A trailing tool result, control
    node or user/system/developer node leaves the request unchanged, so applying the rule twice
    appends only once. The appended node has no id, phase or extras.
    """

    type_id = "prompt_append_empty_user"
    aliases = ("append_empty_user_message",)
    category = "prompt"
    name = {"en": "Prompt: append empty user message", "zh": "提示词：追加空用户消息"}
    description = {
        "en": "When the conversation ends with an assistant turn, appends a user message "
        "(one space by default) for upstreams that reject assistant prefill.",
        "zh": "当对话以助手消息结尾时，追加一条用户消息（默认内容为一个空格），适用于不接受助手预填充的上游。",
    }
    phases = ("request",)
    scopes = ALL_SCOPES
    config_schema = {
        "type": "object",
        "properties": {
            "content": {
                "type": "string",
                "format": "multiline",
                "title": "Content",
                "description": "Text of the appended user message.",
                "default": " ",
            },
        },
    }

    examples = (
        TransformExample(
            title="A conversation ending with the assistant gets a user turn",
            phase="request",
            input={
                "model": "gpt-4o",
                "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}],
            },
            expected={
                "messages": [
                    {"role": "user", "content": "hi"},
                    {"role": "assistant", "content": "hello"},
                    {"role": "user", "content": " "},
                ]
            },
        ),
        TransformExample(
            title="With configured content",
            phase="request",
            config={"content": "continue"},
            input={
                "model": "gpt-4o",
                "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}],
            },
            expected={
                "messages": [
                    {"role": "user", "content": "hi"},
                    {"role": "assistant", "content": "hello"},
                    {"role": "user", "content": "continue"},
                ]
            },
        ),
        TransformExample(
            title="A conversation ending with a tool result is left alone",
            phase="request",
            input={
                "model": "gpt-4o",
                "messages": [
                    {"role": "user", "content": "hi"},
                    {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
                        ],
                    },
                    {"role": "tool", "tool_call_id": "c1", "content": "a.txt"},
                ],
            },
            expected={
                "messages": [
                    {"role": "user", "content": "hi"},
                    {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
                        ],
                    },
                    {"role": "tool", "tool_call_id": "c1", "content": "a.txt"},
                ]
            },
        ),
    )

    def setup(self) -> None:
        self._content: str = self.config["content"]

    def apply_request(self, req: Request, ctx: TransformContext) -> None:
        if req.input and node_role(req.input[-1]) == "assistant":
            req.input.append(TextNode(role="user", content=self._content))
