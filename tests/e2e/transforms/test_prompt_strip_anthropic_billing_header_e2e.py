"""prompt_strip_anthropic_billing_header end to end, as a global rule: an ``anthropic`` SDK
Messages client sends Claude Code's per-request ``x-anthropic-billing-header:`` line in its system
prompt; the provider's upstream speaks Chat Completions (where that changing line would defeat
prefix caching). The line is gone from the upstream's system prompt; the same text in a user
message stays.
"""

from __future__ import annotations

import json

from tests.e2e.transforms.rules import (
    RuleSpec,
    anthropic_client,
    chat_system_texts,
    chat_text_parts,
    last_upstream_body,
    setup,
)

BILLING = "x-anthropic-billing-header: cc_version=2.0.1; cc_entrypoint=cli; cch=abc123;"
USER_TEXT = "x-anthropic-billing-header: this user text must remain"


def test_global_rule_strips_the_billing_line_from_system_only(gateway, mock_upstream):
    s = setup(
        mock_upstream,
        "chat_completion",
        "psabh-global",
        [RuleSpec("prompt_strip_anthropic_billing_header", scope="global")],
    )
    gateway.wait_config()
    reply = anthropic_client(gateway, s.secret).messages.create(
        model=s.model,
        max_tokens=64,
        system=[
            {"type": "text", "text": BILLING},
            {"type": "text", "text": "You are Claude Code.\n  " + BILLING + "\nBe careful."},
        ],
        messages=[{"role": "user", "content": USER_TEXT}],
    )
    assert reply.content[0].text == f"Echo: {USER_TEXT}"
    body = last_upstream_body(mock_upstream)
    assert chat_system_texts(body) == ["You are Claude Code.\nBe careful."]
    assert "cch=abc123" not in json.dumps(body)
    assert chat_text_parts(body["messages"][-1]["content"]) == [USER_TEXT]
