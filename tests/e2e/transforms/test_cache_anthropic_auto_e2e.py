"""cache_anthropic_auto end to end: an ``anthropic`` SDK client through the real server; the
Messages upstream receives the request-level ``cache_control`` and (with the mock's simulated
cache) the second turn reports cache reads to the SDK. A Chat upstream receives nothing."""

from __future__ import annotations

from tests.e2e.transforms.rules import RuleSpec, anthropic_client, last_upstream_body, setup

SYSTEM = "You are a meticulous assistant. " * 40


def test_marker_reaches_messages_upstream_and_second_turn_reads_cache(gateway, mock_upstream):
    s = setup(
        mock_upstream,
        "messages",
        "caa",
        [RuleSpec("cache_anthropic_auto", config={"ttl": "1h"})],
        fault="prompt-cache=1",
    )
    gateway.wait_config()
    client = anthropic_client(gateway, s.secret)
    first = client.messages.create(
        model=s.model, max_tokens=64, system=SYSTEM, messages=[{"role": "user", "content": "q1"}]
    )
    assert last_upstream_body(mock_upstream)["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert first.usage.cache_creation_input_tokens > 0 and first.usage.cache_read_input_tokens == 0
    second = client.messages.create(
        model=s.model,
        max_tokens=64,
        system=SYSTEM,
        messages=[
            {"role": "user", "content": "q1"},
            {"role": "assistant", "content": first.content[0].text},
            {"role": "user", "content": "q2"},
        ],
    )
    assert second.usage.cache_read_input_tokens >= first.usage.cache_creation_input_tokens


def test_client_marker_kept_and_chat_upstream_untouched(gateway, mock_upstream):
    s = setup(
        mock_upstream, "messages", "caa-client", [RuleSpec("cache_anthropic_auto", config={"ttl": "1h"})]
    )
    gateway.wait_config()
    anthropic_client(gateway, s.secret).messages.create(
        model=s.model,
        max_tokens=64,
        messages=[{"role": "user", "content": "hi"}],
        extra_body={"cache_control": {"type": "ephemeral"}},
    )
    assert last_upstream_body(mock_upstream)["cache_control"] == {"type": "ephemeral"}

    s = setup(mock_upstream, "chat_completion", "caa-chat", [RuleSpec("cache_anthropic_auto")])
    gateway.wait_config()
    anthropic_client(gateway, s.secret).messages.create(
        model=s.model, max_tokens=64, messages=[{"role": "user", "content": "hi"}]
    )
    assert "cache_control" not in str(last_upstream_body(mock_upstream))
