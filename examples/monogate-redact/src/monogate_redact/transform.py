"""``redact_patterns``: replace every match of operator-configured regular expressions in prompt
text before the request leaves for the upstream (card numbers, internal host names, ticket keys...).

Request phase only, on purpose. The upstream never sees the redacted text, so it cannot echo it
back; redacting the response as well would need state across stream events (a match can straddle
two deltas) and is a different promise (what the client reads), so it is not offered here rather
than offered half-working. What the client sent is unchanged in the capture's "client request";
the capture's "upstream request" shows what actually left.

Only text nodes whose role is in ``roles`` (default: user) are rewritten; images, files, tool
calls and tool results are not (tool results carry structured output that a regular expression
could corrupt). Patterns are compiled once when the rule is loaded, never per request.
"""

from __future__ import annotations

import re
from typing import Any

from gateway.urp import Request, TextNode
from transforms.base import ALL_SCOPES, Transform, TransformContext, TransformExample

ROLES = ("user", "system", "developer", "assistant")
MAX_PATTERN_LENGTH = 1000


class RedactPatterns(Transform):
    type_id = "redact_patterns"
    category = "prompt"
    name = {"en": "Prompt: redact patterns", "zh": "提示词：按正则脱敏"}
    description = {
        "en": "Replace every match of the configured regular expressions in the prompt text (user messages by "
        "default) before the request leaves for the upstream. Request phase only; responses are not changed.",
        "zh": "在请求发往上游之前，将提示词文本（默认仅用户消息）中匹配所配置正则表达式的内容替换掉。"
        "仅作用于请求阶段，不修改响应。",
    }
    phases = ("request",)
    scopes = ALL_SCOPES
    config_schema = {
        "type": "object",
        "properties": {
            "patterns": {
                "type": "array",
                "minItems": 1,
                "items": {"type": "string", "minLength": 1},
                "title": "Patterns",
                "description": "Python regular expressions (re syntax); every match is replaced.",
            },
            "replacement": {
                "type": "string",
                "default": "[REDACTED]",
                "title": "Replacement",
                "description": "Text put in place of each match (backslash groups such as \\1 are not expanded).",
            },
            "roles": {
                "type": "array",
                "items": {"enum": list(ROLES)},
                "uniqueItems": True,
                "default": ["user"],
                "title": "Roles",
                "description": "Whose text is redacted.",
            },
            "ignore_case": {"type": "boolean", "default": False, "title": "Ignore case"},
        },
        "required": ["patterns"],
        "additionalProperties": False,
    }
    examples = (
        TransformExample(
            title="A card number in the user's message is redacted",
            phase="request",
            config={"patterns": [r"\b(?:\d[ -]?){13,16}\b"]},
            input={
                "model": "gpt-4o",
                "messages": [
                    {"role": "system", "content": "Card 4111 1111 1111 1111 is the test card."},
                    {"role": "user", "content": "My card is 4111 1111 1111 1111, why was it declined?"},
                ],
            },
            expected={
                "messages": [
                    {"role": "system", "content": "Card 4111 1111 1111 1111 is the test card."},
                    {"role": "user", "content": "My card is [REDACTED], why was it declined?"},
                ]
            },
            note={
                "en": "Only user text by default: the operator's own system prompt is left alone.",
                "zh": "默认只处理用户文本：运营者自己的系统提示词不变。",
            },
        ),
        TransformExample(
            title="Several patterns, any case, a custom replacement",
            phase="request",
            protocol="messages",
            config={
                "patterns": [r"[a-z0-9-]+\.corp\.example", r"PROJ-\d+"],
                "replacement": "<hidden>",
                "ignore_case": True,
            },
            input={
                "model": "claude-sonnet-4",
                "max_tokens": 256,
                "messages": [
                    {"role": "user", "content": "Deploy proj-42 to DB1.CORP.EXAMPLE tonight"},
                ],
            },
            expected={"messages": [{"role": "user", "content": "Deploy <hidden> to <hidden> tonight"}]},
        ),
    )

    @classmethod
    def check(cls, config: dict[str, Any]) -> list[tuple[str, str]]:
        errors = []
        flags = re.IGNORECASE if config.get("ignore_case") else 0
        for i, pattern in enumerate(config.get("patterns") or ()):
            if len(pattern) > MAX_PATTERN_LENGTH:
                errors.append((f"patterns.{i}", f"At most {MAX_PATTERN_LENGTH} characters."))
                continue
            try:
                compiled = re.compile(pattern, flags)
            except re.error as exc:
                errors.append((f"patterns.{i}", f"Not a valid regular expression: {exc}."))
                continue
            if compiled.fullmatch(""):
                errors.append(
                    (
                        f"patterns.{i}",
                        "The pattern matches empty text; it would insert the replacement "
                        "between every character.",
                    )
                )
        return errors

    def setup(self) -> None:
        flags = re.IGNORECASE if self.config.get("ignore_case") else 0
        # One alternation: one pass over each text, and overlapping patterns cannot re-redact
        # the replacement of an earlier one.
        self.regex = re.compile("|".join(f"(?:{p})" for p in self.config["patterns"]), flags)
        self.replacement = self.config["replacement"]
        self.roles = frozenset(self.config["roles"])

    def apply_request(self, req: Request, ctx: TransformContext) -> None:
        count = 0
        for node in req.input:
            if isinstance(node, TextNode) and node.role in self.roles and node.content:
                node.content, n = self.regex.subn(lambda _m: self.replacement, node.content)
                count += n
        if count:
            ctx.shared[self.type_id] = ctx.shared.get(self.type_id, 0) + count
