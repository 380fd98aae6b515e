"""role_developer_to_system end to end, as an API-key rule: an ``openai`` SDK Responses client
sends a ``developer`` message; the provider's upstream speaks Chat Completions, where the gateway
would otherwise forward the ``developer`` role (which older Chat upstreams reject). The key's rule
turns it into a ``system`` message.
"""

from __future__ import annotations

from tests.e2e.transforms.rules import RuleSpec, last_upstream_body, openai_client, setup

INPUT = [{"role": "developer", "content": "Be brief."}, {"role": "user", "content": "hi"}]


def test_api_key_rule_turns_developer_into_system(gateway, mock_upstream):
    s = setup(
        mock_upstream, "chat_completion", "rdts", [RuleSpec("role_developer_to_system", scope="api_key")]
    )
    gateway.wait_config()
    reply = openai_client(gateway, s.secret).responses.create(model=s.model, input=INPUT)
    assert reply.output_text == "Echo: hi"
    assert last_upstream_body(mock_upstream)["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hi"},
    ]


def test_without_the_rule_developer_is_forwarded(gateway, mock_upstream):
    """The control for the test above."""
    s = setup(mock_upstream, "chat_completion", "rdts-none")
    gateway.wait_config()
    openai_client(gateway, s.secret).responses.create(model=s.model, input=INPUT)
    assert last_upstream_body(mock_upstream)["messages"][0] == {"role": "developer", "content": "Be brief."}
