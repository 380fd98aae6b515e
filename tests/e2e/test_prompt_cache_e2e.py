"""Prompt caching through the real server against the mock's simulated provider cache.

- Hit rate over a growing 8-turn conversation with the cache rules on versus off (Anthropic
  upstream: markers are required; OpenAI upstream: a per-request date line defeats the prefix).
- The cached tokens every SDK reports (Chat, Responses, Messages; stream and non-stream).
"""

from __future__ import annotations

import pytest

from tests.e2e.transforms.rules import RuleSpec, anthropic_client, openai_client, setup

SYSTEM = "You are a meticulous assistant for a large codebase. Follow the house style. " * 30
TURNS = 8


def conversation_hit_rate(gateway, secret: str, model: str, system_for_turn) -> float:
    """Cache-read tokens / input tokens over a growing conversation, as the anthropic SDK reports them."""
    client = anthropic_client(gateway, secret)
    history: list[dict] = []
    read = total = 0
    for turn in range(TURNS):
        history.append({"role": "user", "content": f"question {turn}"})
        reply = client.messages.create(
            model=model, max_tokens=64, system=system_for_turn(turn), messages=history
        )
        u = reply.usage
        read += u.cache_read_input_tokens or 0
        total += u.input_tokens + (u.cache_read_input_tokens or 0) + (u.cache_creation_input_tokens or 0)
        history.append({"role": "assistant", "content": reply.content[0].text})
    return read / total


def test_anthropic_hit_rate_with_rules_on_versus_off(gateway, mock_upstream):
    on = setup(
        mock_upstream,
        "messages",
        "hr-on",
        [RuleSpec("cache_anthropic_system"), RuleSpec("cache_anthropic_auto")],
        fault="prompt-cache=on",
    )
    off = setup(mock_upstream, "messages", "hr-off", fault="prompt-cache=off")
    gateway.wait_config()
    rate_on = conversation_hit_rate(gateway, on.secret, on.model, lambda turn: SYSTEM)
    rate_off = conversation_hit_rate(gateway, off.secret, off.model, lambda turn: SYSTEM)
    print(f"anthropic hit rate: rules on {rate_on:.0%}, off {rate_off:.0%}")
    assert rate_off == 0
    assert rate_on > 0.7


def test_openai_hit_rate_with_prefix_stabilize_on_versus_off(gateway, mock_upstream):
    def dated(turn: int) -> str:
        return f"<env>\nToday's date: 2026-09-{turn + 1:02d}\n</env>\n{SYSTEM}"

    on = setup(
        mock_upstream,
        "chat_completion",
        "hr-oa-on",
        [RuleSpec("cache_prefix_stabilize"), RuleSpec("cache_openai_prompt")],
        fault="prompt-cache=oa-on",
    )
    off = setup(mock_upstream, "chat_completion", "hr-oa-off", fault="prompt-cache=oa-off")
    gateway.wait_config()
    rate_on = conversation_hit_rate(gateway, on.secret, on.model, dated)
    rate_off = conversation_hit_rate(gateway, off.secret, off.model, dated)
    print(f"openai hit rate: rules on {rate_on:.0%}, off {rate_off:.0%}")
    assert rate_off == 0
    assert rate_on > 0.6


def _chat(gateway, s, stream):
    client = openai_client(gateway, s.secret)
    args = {
        "model": s.model,
        "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "hi"}],
    }
    if stream:
        with client.chat.completions.stream(**args, stream_options={"include_usage": True}) as st:
            usage = st.get_final_completion().usage
    else:
        usage = client.chat.completions.create(**args).usage
    return usage.prompt_tokens, usage.prompt_tokens_details.cached_tokens


def _responses(gateway, s, stream):
    client = openai_client(gateway, s.secret)
    args = {"model": s.model, "instructions": SYSTEM, "input": "hi"}
    if stream:
        with client.responses.stream(**args) as st:
            usage = st.get_final_response().usage
    else:
        usage = client.responses.create(**args).usage
    return usage.input_tokens, usage.input_tokens_details.cached_tokens


def _messages(gateway, s, stream):
    client = anthropic_client(gateway, s.secret)
    args = {
        "model": s.model,
        "max_tokens": 64,
        "system": SYSTEM,
        "messages": [{"role": "user", "content": "hi"}],
    }
    if stream:
        with client.messages.stream(**args) as st:
            usage = st.get_final_message().usage
    else:
        usage = client.messages.create(**args)
        usage = usage.usage
    return (
        usage.input_tokens + usage.cache_read_input_tokens + usage.cache_creation_input_tokens,
        usage.cache_read_input_tokens,
    )


CLIENTS = {"chat": _chat, "responses": _responses, "messages": _messages}


@pytest.mark.parametrize("upstream", ["messages", "responses"])
@pytest.mark.parametrize("client", list(CLIENTS))
@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_every_sdk_reports_cached_tokens(gateway, mock_upstream, client, upstream, stream):
    s = setup(
        mock_upstream,
        upstream,
        f"sdk-{client}-{upstream}-{stream}",
        [RuleSpec("cache_anthropic_system")],
        fault=f"prompt-cache={client}-{upstream}-{stream}",
    )
    gateway.wait_config()
    total1, read1 = CLIENTS[client](gateway, s, stream)
    total2, read2 = CLIENTS[client](gateway, s, stream)
    assert read1 == 0
    assert 0 < read2 < total2, "cached tokens reported, and counted once inside the input total"
    assert total1 == total2
