"""prompt_strip_anthropic_billing_header: remove Claude Code's per-request billing line from the
system prompt, which otherwise defeats prefix caching on every upstream."""

from __future__ import annotations

from gateway.urp import Request, TextNode
from transforms.base import ALL_SCOPES, Transform, TransformContext, TransformExample
from transforms.lib.role_helpers import NO_CONFIG_SCHEMA

MARKER = "x-anthropic-billing-header:"
_INSPECTED_ROLES = frozenset({"system", "developer"})


def strip_billing_lines(content: str) -> str:
    """Drop every line whose text after leading whitespace starts with the marker
    (case-sensitive), then trim surrounding line breaks."""
    if MARKER in content:
        # Split on "\n" only: a "\r" before it stays part of its line.
        content = "\n".join(line for line in content.split("\n") if not line.lstrip().startswith(MARKER))
    return content.strip("\r\n")


class PromptStripAnthropicBillingHeader(Transform):
    """Inspects only system and developer text nodes. Lines starting (after indentation) with
    ``x-anthropic-billing-header:`` are removed; every inspected node is trimmed of leading and
    trailing line breaks, and one left empty (or empty to begin with) is removed from the input.
    User, assistant, tool, media, reasoning, provider-item and control nodes are untouched.
    Idempotent.

    Small difference from the reference: it trimmed only ``\\n`` at the start and one kind of
    ``\\r`` at the end; this trims any mix of ``\\r``/``\\n`` at both ends, so a CRLF prompt
    ends the same way an LF one does.
    """

    type_id = "prompt_strip_anthropic_billing_header"
    aliases = (
        "remove_anthropic_billing_header",
        "remove_anthropic_billing_headers",
        "strip_anthropic_billing_header",
        "strip_anthropic_billing_headers",
        "strip_claude_code_billing_header",
    )
    category = "prompt"
    name = {"en": "Prompt: strip Anthropic billing header", "zh": "提示词：移除 Anthropic 计费头"}
    description = {
        "en": "Removes the per-request 'x-anthropic-billing-header:' line Claude Code writes into the "
        "system prompt, so prompt caching keeps working.",
        "zh": "移除 Claude Code 写入系统提示词中的每请求 'x-anthropic-billing-header:' 行，使提示词缓存保持命中。",
    }
    phases = ("request",)
    scopes = ALL_SCOPES
    config_schema = NO_CONFIG_SCHEMA

    examples = (
        TransformExample(
            title="The billing line leaves the system prompt; user text is untouched",
            phase="request",
            input={
                "model": "gpt-4o",
                "messages": [
                    {
                        "role": "system",
                        "content": "x-anthropic-billing-header: cc_version=1; cch=abc;\nKeep this.",
                    },
                    {"role": "user", "content": "x-anthropic-billing-header: this user text must remain;"},
                ],
            },
            expected={
                "messages": [
                    {"role": "system", "content": "Keep this."},
                    {"role": "user", "content": "x-anthropic-billing-header: this user text must remain;"},
                ]
            },
        ),
        TransformExample(
            title="A system message that held only the header disappears",
            phase="request",
            input={
                "model": "gpt-4o",
                "messages": [
                    {"role": "system", "content": "x-anthropic-billing-header: cc_version=1; cch=abc;"},
                    {"role": "user", "content": "hi"},
                ],
            },
            expected={"messages": [{"role": "user", "content": "hi"}]},
        ),
        TransformExample(
            title="Indented header lines in developer messages too",
            phase="request",
            input={
                "model": "gpt-4o",
                "messages": [
                    {"role": "developer", "content": "A\n   x-anthropic-billing-header: z\nB"},
                    {"role": "user", "content": "hi"},
                ],
            },
            expected={
                "messages": [{"role": "developer", "content": "A\nB"}, {"role": "user", "content": "hi"}]
            },
        ),
    )

    def apply_request(self, req: Request, ctx: TransformContext) -> None:
        kept = []
        changed = False
        for node in req.input:
            if type(node) is TextNode and node.role in _INSPECTED_ROLES:
                node.content = strip_billing_lines(node.content)
                if not node.content:
                    changed = True
                    continue
            kept.append(node)
        if changed:
            req.input[:] = kept
