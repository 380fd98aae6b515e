"""cache_openai_prompt end to end: an ``anthropic`` SDK client through the real server to a
Responses upstream: the upstream receives a stable ``prompt_cache_key`` (same for two turns with
the same system prompt) and the retention; a Messages upstream receives neither; identity mode
keys by the calling key."""

from __future__ import annotations

import re

from tests.e2e.transforms.rules import (
    RuleSpec,
    anthropic_client,
    last_upstream_body,
    openai_client,
    post_raw,
    setup,
)


def ask(gateway, secret, model, system, text):
    anthropic_client(gateway, secret).messages.create(
        model=model, max_tokens=64, system=system, messages=[{"role": "user", "content": text}]
    )


def test_stable_key_reaches_responses_upstream(gateway, mock_upstream):
    s = setup(mock_upstream, "responses", "cop", [RuleSpec("cache_openai_prompt", scope="global")])
    gateway.wait_config()
    ask(gateway, s.secret, s.model, "You are a coding assistant.", "first")
    first = last_upstream_body(mock_upstream)
    ask(gateway, s.secret, s.model, "You are a coding assistant.", "second")
    second = last_upstream_body(mock_upstream)
    assert re.fullmatch(r"mzpc_[0-9a-f]{32}", first["prompt_cache_key"])
    assert first["prompt_cache_key"] == second["prompt_cache_key"]
    assert first["prompt_cache_retention"] == "24h"
    ask(gateway, s.secret, s.model, "Another system prompt.", "first")
    assert last_upstream_body(mock_upstream)["prompt_cache_key"] != first["prompt_cache_key"]


def test_client_key_kept_and_messages_upstream_untouched(gateway, mock_upstream):
    s = setup(
        mock_upstream,
        "chat_completion",
        "cop-client",
        [RuleSpec("cache_openai_prompt", config={"retention": "in_memory"})],
    )
    gateway.wait_config()
    r = post_raw(
        gateway,
        s.secret,
        "/v1/chat/completions",
        {"model": s.model, "prompt_cache_key": "mine", "messages": [{"role": "user", "content": "hi"}]},
    )
    assert r.status_code == 200
    body = last_upstream_body(mock_upstream)
    assert body["prompt_cache_key"] == "mine" and body["prompt_cache_retention"] == "in_memory"

    s = setup(mock_upstream, "messages", "cop-msg", [RuleSpec("cache_openai_prompt")])
    gateway.wait_config()
    openai_client(gateway, s.secret).chat.completions.create(
        model=s.model, messages=[{"role": "user", "content": "hi"}]
    )
    body = last_upstream_body(mock_upstream)
    assert "prompt_cache_key" not in body and "prompt_cache_retention" not in body


def test_identity_mode_keys_by_calling_key(gateway, mock_upstream):
    from django.contrib.auth import get_user_model

    from tests.servers import make_key
    from transforms.lib.cache_keys import xxh3_128_hex

    alice = get_user_model().objects.create_user("alice-cop", password="x")
    s = setup(
        mock_upstream,
        "responses",
        "cop-id",
        [RuleSpec("cache_openai_prompt", scope="global", config={"key_mode": "identity"})],
        owner=alice,
    )
    other, other_secret = make_key("other", owner=alice)
    gateway.wait_config()
    ask(gateway, s.secret, s.model, "S1", "a")
    mine = last_upstream_body(mock_upstream)["prompt_cache_key"]
    ask(gateway, s.secret, s.model, "S2", "b")
    assert last_upstream_body(mock_upstream)["prompt_cache_key"] == mine
    assert mine == "mzpc_" + xxh3_128_hex({"username": "alice-cop", "api_key_id": str(s.key.id)})
    ask(gateway, other_secret, s.model, "S1", "a")
    assert last_upstream_body(mock_upstream)["prompt_cache_key"] != mine
    assert "alice-cop" not in str(last_upstream_body(mock_upstream)), (
        "the identity itself never goes on the wire"
    )
