"""role_system_to_developer end to end: an ``anthropic`` SDK Messages client sends a system prompt;
the provider's upstream speaks Chat Completions (reasoning models there want ``developer``). The
provider rule turns the system message into a ``developer`` message.
"""

from __future__ import annotations

from tests.e2e.transforms.rules import (
    RuleSpec,
    anthropic_client,
    chat_system_texts,
    last_upstream_body,
    setup,
)


def test_system_prompt_becomes_a_developer_message(gateway, mock_upstream):
    s = setup(mock_upstream, "chat_completion", "rstd", [RuleSpec("role_system_to_developer")])
    gateway.wait_config()
    reply = anthropic_client(gateway, s.secret).messages.create(
        model=s.model, max_tokens=64, system="Be brief.", messages=[{"role": "user", "content": "hi"}]
    )
    assert reply.content[0].text == "Echo: hi"
    body = last_upstream_body(mock_upstream)
    assert [m["role"] for m in body["messages"]] == ["developer", "user"]
    assert chat_system_texts(body, "developer") == ["Be brief."]
