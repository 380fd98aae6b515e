"""cache_user_id end to end: a key owned by ``alice``; when the request carries a cache marker the
Messages upstream receives ``metadata.user_id == "alice"`` and a Chat upstream ``user == "alice"``;
no marker, or a client's own user, leaves it alone. The username reaches the rule through the
transform context, never through the request."""

from __future__ import annotations

from tests.e2e.transforms.rules import RuleSpec, anthropic_client, last_upstream_body, openai_client, setup

MARKED = [{"type": "text", "text": "S", "cache_control": {"type": "ephemeral"}}]


def owner(name):
    from django.contrib.auth import get_user_model

    return get_user_model().objects.create_user(name, password="x")


def test_owner_becomes_user_id_when_marked(gateway, mock_upstream):
    s = setup(
        mock_upstream,
        "messages",
        "cuid",
        [RuleSpec("cache_user_id", scope="api_key")],
        owner=owner("alice-cu"),
    )
    gateway.wait_config()
    client = anthropic_client(gateway, s.secret)
    client.messages.create(
        model=s.model, max_tokens=64, system=MARKED, messages=[{"role": "user", "content": "hi"}]
    )
    assert last_upstream_body(mock_upstream)["metadata"] == {"user_id": "alice-cu"}
    client.messages.create(
        model=s.model, max_tokens=64, system="S", messages=[{"role": "user", "content": "hi"}]
    )
    assert "metadata" not in last_upstream_body(mock_upstream)
    client.messages.create(
        model=s.model,
        max_tokens=64,
        system=MARKED,
        metadata={"user_id": "bob"},
        messages=[{"role": "user", "content": "hi"}],
    )
    assert last_upstream_body(mock_upstream)["metadata"] == {"user_id": "bob"}


def test_chat_upstream_user_with_system_rule(gateway, mock_upstream):
    s = setup(
        mock_upstream,
        "chat_completion",
        "cuid-chat",
        [RuleSpec("cache_user_id", scope="api_key")],
        owner=owner("carol-cu"),
    )
    gateway.wait_config()
    openai_client(gateway, s.secret).chat.completions.create(
        model=s.model,
        messages=[
            {
                "role": "system",
                "content": [{"type": "text", "text": "S", "cache_control": {"type": "ephemeral"}}],
            },
            {"role": "user", "content": "hi"},
        ],
    )
    assert last_upstream_body(mock_upstream)["user"] == "carol-cu"
