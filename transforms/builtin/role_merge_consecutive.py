"""role_merge_consecutive: fold runs of adjacent same-role text into one node, for upstreams
that reject consecutive messages of the same role or multi-part text."""

from __future__ import annotations

from gateway.urp import Request, TextNode
from gateway.urp.nodes import Node
from transforms.base import ALL_SCOPES, Transform, TransformContext, TransformExample

# Text carrying any of these must keep its own boundaries (they describe exactly that text).
_UNMERGEABLE_EXTRA = frozenset({"signature", "logprobs", "citations", "annotations"})


def _mergeable(node: Node) -> bool:
    return type(node) is TextNode and not (node.extra and not _UNMERGEABLE_EXTRA.isdisjoint(node.extra))


def _has_mergeable_pair(nodes: list[Node]) -> bool:
    prev = None
    for node in nodes:
        if (
            type(node) is TextNode
            and prev is not None
            and node.role == prev.role
            and node.phase == prev.phase
            and _mergeable(node)
            and _mergeable(prev)
        ):
            return True
        prev = node if type(node) is TextNode else None
    return False


class RoleMergeConsecutive(Transform):
    """Merges directly adjacent text nodes that have the same role and the same ``phase``.

    The later content is appended with ``separator`` between, by default none (the
    reference's behaviour): the internal representation does not record message boundaries, and
    adjacent same-role text is often the parts of one client message, whose text must not
    change. Operators whose clients send separate same-role messages ("hello", then
    "benchmark") can set ``"\n\n"`` so the words do not run together. The earlier node keeps its id and phase; extras are
    merged with the earlier node's keys winning. Any other node between two texts (image, tool
    call or result, reasoning, control node) breaks the run. Text annotated with a signature,
    logprobs, citations or annotations is never merged with a neighbour.
    """

    type_id = "role_merge_consecutive"
    aliases = ("merge_consecutive_roles",)
    category = "role"
    name = {"en": "Role: merge consecutive", "zh": "角色：合并连续消息"}
    description = {
        "en": "Merges adjacent text of the same role into a single text block.",
        "zh": "将相邻的同角色文本合并为一个文本块。",
    }
    phases = ("request",)
    scopes = ALL_SCOPES
    config_schema = {
        "type": "object",
        "properties": {
            "separator": {
                "type": "string",
                "default": "",
                "description": "Inserted between merged texts; empty joins them directly.",
            },
        },
        "additionalProperties": False,
    }

    examples = (
        TransformExample(
            title="Adjacent user messages become one",
            phase="request",
            input={
                "model": "gpt-4o",
                "messages": [
                    {"role": "user", "content": "a"},
                    {"role": "user", "content": "b"},
                    {"role": "assistant", "content": "c"},
                ],
            },
            expected={"messages": [{"role": "user", "content": "ab"}, {"role": "assistant", "content": "c"}]},
        ),
        TransformExample(
            title="With a separator",
            phase="request",
            config={"separator": "\n\n"},
            input={
                "model": "gpt-4o",
                "messages": [
                    {"role": "user", "content": "a"},
                    {"role": "user", "content": "b"},
                    {"role": "assistant", "content": "c"},
                ],
            },
            expected={
                "messages": [{"role": "user", "content": "a\n\nb"}, {"role": "assistant", "content": "c"}]
            },
        ),
        TransformExample(
            title="An image between two texts breaks the run",
            phase="request",
            input={
                "model": "gpt-4o",
                "messages": [
                    {"role": "user", "content": "a"},
                    {
                        "role": "user",
                        "content": [{"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}],
                    },
                    {"role": "user", "content": "b"},
                ],
            },
            expected={
                "messages": [
                    {"role": "user", "content": "a"},
                    {
                        "role": "user",
                        "content": [{"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}],
                    },
                    {"role": "user", "content": "b"},
                ]
            },
        ),
    )

    def setup(self) -> None:
        self.separator: str = self.config["separator"]

    def apply_request(self, req: Request, ctx: TransformContext) -> None:
        if not _has_mergeable_pair(req.input):  # the common case: roles already alternate
            return
        out: list[Node] = []
        prev: TextNode | None = None  # the last kept node, when it can absorb a neighbour
        parts: list[str] = []
        for node in req.input:
            if prev is not None and _mergeable(node) and node.role == prev.role and node.phase == prev.phase:
                parts.append(node.content)
                for key, value in node.extra.items():
                    prev.extra.setdefault(key, value)
                continue
            if len(parts) > 1:
                prev.content = self.separator.join(parts)  # type: ignore[union-attr]
            out.append(node)
            if _mergeable(node):
                prev, parts = node, [node.content]  # type: ignore[union-attr]
            else:
                prev, parts = None, []
        if prev is not None and len(parts) > 1:
            prev.content = self.separator.join(parts)
        if len(out) != len(req.input):
            req.input[:] = out
