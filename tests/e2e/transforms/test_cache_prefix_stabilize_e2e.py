"""cache_prefix_stabilize end to end: an ``anthropic`` SDK client (Claude Code style) whose
system prompt starts with a changing ``<env>`` block; a Chat upstream receives the block moved to
the end; with the mock's simulated prefix cache the second turn now hits. A Messages upstream
receives the prompt unchanged."""

from __future__ import annotations

from tests.e2e.transforms.rules import (
    RuleSpec,
    anthropic_client,
    chat_system_texts,
    last_upstream_body,
    setup,
)

RULES = "## Rules\n" + "Prefer the existing convention and keep changes small. " * 30


def system(day: int) -> str:
    return f"You are a coding agent.\n<env>\nToday's date: 2026-09-{day:02d}\n</env>\n{RULES}"


def test_env_block_moves_and_prefix_cache_hits(gateway, mock_upstream):
    s = setup(
        mock_upstream,
        "chat_completion",
        "cps",
        [RuleSpec("cache_prefix_stabilize", scope="global")],
        fault="prompt-cache=1",
    )
    gateway.wait_config()
    client = anthropic_client(gateway, s.secret)
    client.messages.create(
        model=s.model, max_tokens=64, system=system(1), messages=[{"role": "user", "content": "a"}]
    )
    assert chat_system_texts(last_upstream_body(mock_upstream)) == [
        f"You are a coding agent.\n{RULES}\n<env>\nToday's date: 2026-09-01\n</env>"
    ]
    second = client.messages.create(
        model=s.model, max_tokens=64, system=system(2), messages=[{"role": "user", "content": "b"}]
    )
    assert second.usage.cache_read_input_tokens > 300


def test_without_the_rule_the_date_defeats_the_cache(gateway, mock_upstream):
    """The control for the test above."""
    s = setup(mock_upstream, "chat_completion", "cps-none", fault="prompt-cache=1")
    gateway.wait_config()
    client = anthropic_client(gateway, s.secret)
    client.messages.create(
        model=s.model, max_tokens=64, system=system(1), messages=[{"role": "user", "content": "a"}]
    )
    second = client.messages.create(
        model=s.model, max_tokens=64, system=system(2), messages=[{"role": "user", "content": "b"}]
    )
    assert second.usage.cache_read_input_tokens == 0


def test_messages_upstream_unchanged(gateway, mock_upstream):
    s = setup(mock_upstream, "messages", "cps-msg", [RuleSpec("cache_prefix_stabilize")])
    gateway.wait_config()
    anthropic_client(gateway, s.secret).messages.create(
        model=s.model, max_tokens=64, system=system(1), messages=[{"role": "user", "content": "a"}]
    )
    assert last_upstream_body(mock_upstream)["system"] == system(1)
