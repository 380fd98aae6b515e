"""cache_anthropic_system end to end: an ``openai`` SDK Chat client's system prompt reaches the
Messages upstream as a system block with ``cache_control``; a Messages client's own marker is
forwarded unchanged; a Responses upstream gets no marker."""

from __future__ import annotations

from tests.e2e.transforms.rules import RuleSpec, anthropic_client, last_upstream_body, openai_client, setup


def test_chat_client_system_prompt_marked_for_messages_upstream(gateway, mock_upstream):
    s = setup(mock_upstream, "messages", "cas", [RuleSpec("cache_anthropic_system", scope="api_key")])
    gateway.wait_config()
    openai_client(gateway, s.secret).chat.completions.create(
        model=s.model,
        messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}],
    )
    body = last_upstream_body(mock_upstream)
    assert body["system"] == [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}]
    assert all("cache_control" not in str(m) for m in body["messages"])


def test_client_marker_forwarded_unchanged(gateway, mock_upstream):
    s = setup(mock_upstream, "messages", "cas-client", [RuleSpec("cache_anthropic_system")])
    gateway.wait_config()
    marker = {"type": "ephemeral", "ttl": "1h"}
    anthropic_client(gateway, s.secret).messages.create(
        model=s.model,
        max_tokens=64,
        system=[{"type": "text", "text": "S", "cache_control": marker}],
        messages=[{"role": "user", "content": "hi"}],
    )
    assert last_upstream_body(mock_upstream)["system"] == [
        {"type": "text", "text": "S", "cache_control": marker}
    ]


def test_responses_upstream_untouched(gateway, mock_upstream):
    s = setup(mock_upstream, "responses", "cas-resp", [RuleSpec("cache_anthropic_system")])
    gateway.wait_config()
    openai_client(gateway, s.secret).chat.completions.create(
        model=s.model,
        messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}],
    )
    assert "cache_control" not in str(last_upstream_body(mock_upstream))
