"""prompt_inject_system end to end, as an API-key rule: an ``anthropic`` SDK Messages client sends
a system prompt; the provider's upstream speaks Chat Completions. The injected segment leads the
upstream's system prompt for ``prepend`` and follows the client's for ``append`` (our ``prepend``
really prepends; see the transform's docstring), and is the whole system prompt when the client
sent none.
"""

from __future__ import annotations

import pytest

from tests.e2e.transforms.rules import (
    RuleSpec,
    anthropic_client,
    chat_system_texts,
    last_upstream_body,
    setup,
)

OPERATOR = "Operator rules: answer in English."


@pytest.mark.parametrize("position", ["prepend", "append"])
def test_api_key_rule_injects_a_system_segment(gateway, mock_upstream, position):
    s = setup(
        mock_upstream,
        "chat_completion",
        f"pis-{position}",
        [
            RuleSpec(
                "prompt_inject_system", config={"content": OPERATOR, "position": position}, scope="api_key"
            )
        ],
    )
    gateway.wait_config()
    client = anthropic_client(gateway, s.secret)
    reply = client.messages.create(
        model=s.model, max_tokens=64, system="Client rules.", messages=[{"role": "user", "content": "hi"}]
    )
    assert reply.content[0].text == "Echo: hi"
    body = last_upstream_body(mock_upstream)
    expected = [OPERATOR, "Client rules."] if position == "prepend" else ["Client rules.", OPERATOR]
    # the client sent a string: the upstream gets one string system message (issue 19)
    assert chat_system_texts(body) == ["\n\n".join(expected)]
    assert isinstance(body["messages"][0]["content"], str)
    assert body["messages"][0]["role"] == "system"
    assert [m["role"] for m in body["messages"]] == ["system", "user"]

    client.messages.create(model=s.model, max_tokens=64, messages=[{"role": "user", "content": "hi"}])
    body = last_upstream_body(mock_upstream)
    assert chat_system_texts(body) == [OPERATOR]
    assert [m["role"] for m in body["messages"]] == ["system", "user"]


def test_chains_run_provider_then_global_then_api_key(gateway, mock_upstream):
    """One ``append`` rule per scope: the segments land in execution order."""
    s = setup(
        mock_upstream,
        "chat_completion",
        "pis-scopes",
        [
            RuleSpec(
                "prompt_inject_system", config={"content": "from key", "position": "append"}, scope="api_key"
            ),
            RuleSpec(
                "prompt_inject_system",
                config={"content": "from global", "position": "append"},
                scope="global",
            ),
            RuleSpec("prompt_inject_system", config={"content": "from provider", "position": "append"}),
        ],
    )
    gateway.wait_config()
    anthropic_client(gateway, s.secret).messages.create(
        model=s.model, max_tokens=64, system="Client rules.", messages=[{"role": "user", "content": "hi"}]
    )
    assert chat_system_texts(last_upstream_body(mock_upstream)) == [
        "Client rules.\n\nfrom provider\n\nfrom global\n\nfrom key"
    ]
