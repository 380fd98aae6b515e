"""prompt_inject_system: add an operator-written segment to the system prompt."""

from __future__ import annotations

from gateway.urp import Request, TextNode
from gateway.urp.nodes import Node
from transforms.base import ALL_SCOPES, Transform, TransformContext, TransformExample
from transforms.lib.role_helpers import has_own_role, is_control


class PromptInjectSystem(Transform):
    """Inserts a new system text node; the client's own system nodes are never edited (encoders
    fold adjacent system nodes into one system prompt, so the new node is an extra segment).

    - ``prepend``: immediately before the first system node, so the injected text leads the
      system prompt.
    - ``append``: immediately after the last system node.
    - No system node at all: at the start of the input for both positions.

    Deliberate differences from the reference implementation, which users would not want:
    its ``prepend`` inserted *after* the first system node (so prepend and append were the same
    with a single system segment), and its ``append`` without a system node put a system
    message after the last user turn, which many Chat upstreams and chat templates reject.
    Control nodes directly before the insertion point keep introducing the envelope they
    belonged to (the new node goes before them), and empty ``content`` is refused on save
    (an empty system segment is rejected by several upstreams).

    A Chat upstream still gets a string system message when the client sent a string: the Chat
    encoder joins plain-text system segments with a blank line instead of turning the message
    into a part array, which some OpenAI-compatible servers reject (issue 19).
    """

    type_id = "prompt_inject_system"
    aliases = ("inject_system_prompt",)
    category = "prompt"
    name = {"en": "Prompt: inject system prompt", "zh": "提示词：注入系统提示词"}
    description = {
        "en": "Adds a system prompt segment before or after the client's system prompt.",
        "zh": "在客户端系统提示词之前或之后添加一段系统提示词。",
    }
    phases = ("request",)
    scopes = ALL_SCOPES
    config_schema = {
        "type": "object",
        "properties": {
            "content": {
                "type": "string",
                "format": "multiline",
                "minLength": 1,
                "title": "Content",
                "description": "The system prompt text to inject.",
            },
            "position": {
                "type": "string",
                "enum": ["prepend", "append"],
                "title": "Position",
                "description": "prepend: before the client's system prompt; append: after it.",
                "default": "append",
            },
        },
        "required": ["content", "position"],
    }

    examples = (
        TransformExample(
            title="prepend: the injected text leads the system prompt",
            phase="request",
            config={"content": "P", "position": "prepend"},
            input={
                "model": "gpt-4o",
                "messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}],
            },
            expected={
                "messages": [
                    {"role": "system", "content": "P"},
                    {"role": "system", "content": "S"},
                    {"role": "user", "content": "U"},
                ]
            },
            note={
                "en": "Unlike the reference, prepend goes before the first system segment (the reference put it "
                "after, the same as append).",
                "zh": "与参考实现不同，prepend 放在第一个 system 段之前（参考实现放在其后，与 append 相同）。",
            },
        ),
        TransformExample(
            title="append: after the last system segment (Chat folds it into that message, still a string)",
            phase="request",
            config={"content": "A", "position": "append"},
            input={
                "model": "gpt-4o",
                "messages": [
                    {"role": "system", "content": "S1"},
                    {"role": "user", "content": "U"},
                    {"role": "system", "content": "S2"},
                ],
            },
            expected={
                "messages": [
                    {"role": "system", "content": "S1"},
                    {"role": "user", "content": "U"},
                    {"role": "system", "content": "S2\n\nA"},
                ]
            },
            note={
                "en": "The client sent a string, so the system message stays a string (some OpenAI-compatible "
                "servers reject a part array there).",
                "zh": "客户端发送的是字符串，因此 system 消息仍为字符串（部分 OpenAI 兼容服务器会拒绝部件数组）。",
            },
        ),
        TransformExample(
            title="No system message: the new one goes first",
            phase="request",
            config={"content": "A", "position": "append"},
            input={"model": "gpt-4o", "messages": [{"role": "user", "content": "U"}]},
            expected={"messages": [{"role": "system", "content": "A"}, {"role": "user", "content": "U"}]},
            note={
                "en": "The reference appended it after the last user turn, which many upstreams reject.",
                "zh": "参考实现将其追加在最后一个用户轮次之后，许多上游会拒绝。",
            },
        ),
    )

    def setup(self) -> None:
        # Saved rules are validated; .get() keeps an unvalidated row from breaking the snapshot.
        self._content: str = self.config.get("content") or ""
        self._prepend = self.config.get("position") == "prepend"

    def apply_request(self, req: Request, ctx: TransformContext) -> None:
        if not self._content:
            return
        nodes = req.input
        new = TextNode(role="system", content=self._content)
        if self._prepend:
            # Only role-bearing kinds can be system (refusals, reasoning, tool calls are assistant).
            first = next((i for i, node in enumerate(nodes) if has_own_role(node, "system")), None)
            nodes.insert(0 if first is None else _before_controls(nodes, first), new)
        else:
            last = next((i for i in range(len(nodes) - 1, -1, -1) if has_own_role(nodes[i], "system")), None)
            nodes.insert(0 if last is None else last + 1, new)


def _before_controls(nodes: list[Node], index: int) -> int:
    """Step back over control nodes that introduce the envelope of ``nodes[index]``."""
    while index > 0 and is_control(nodes[index - 1]):
        index -= 1
    return index
