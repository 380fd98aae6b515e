"""Presentation markers that response transforms put on reasoning nodes and deltas, and that
client-protocol encoders read. They live in ``extra`` under the internal prefix, so no encoder
ever writes them on the wire and no decoder accepts them from it.

They say how to *show* reasoning, never what it is: canonical data keeps calling a summary a
summary.
"""

from __future__ import annotations

from typing import Any

from .nodes import INTERNAL_PREFIX, ReasoningNode

# This summary was raw chain of thought moved by reasoning_content_to_summary. A Messages client
# shows summaries as thinking anyway; the marker records the provenance for captures.
SUMMARY_AS_THINKING = f"{INTERNAL_PREFIX}summary_as_thinking"
# Chat Completions encoders also emit the reasoning text as ``reasoning_content`` (the
# DeepSeek/OpenRouter field), next to the normal reasoning fields.
INJECT_REASONING_CONTENT = f"{INTERNAL_PREFIX}inject_reasoning_content"
# Chat Completions encoders emit the summary as ``reasoning_content`` (what OpenWebUI renders as
# raw chain of thought) instead of as a ``reasoning.summary`` detail.
SUMMARY_AS_CHAT_CONTENT = f"{INTERNAL_PREFIX}summary_as_chat_content"


def chat_reasoning_content(node: ReasoningNode) -> str | None:
    """The ``reasoning_content`` value a Chat Completions encoder should add for this node, or
    None: the plaintext content when the injected field is asked for, else the summary when
    either marker asks for it. Encrypted payloads never contribute."""
    extra: dict[str, Any] = node.extra
    if not extra:
        return None
    inject = extra.get(INJECT_REASONING_CONTENT)
    if inject and node.content:
        return node.content
    if (inject or extra.get(SUMMARY_AS_CHAT_CONTENT)) and node.summary:
        return node.summary
    return None
