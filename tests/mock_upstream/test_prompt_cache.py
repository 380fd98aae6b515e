"""The mock's simulated prompt cache (opt-in), unit level."""

from gateway.mock_upstream.prompt_cache import PromptCache

LONG = "You are a careful assistant. " * 40  # ~1160 characters


def chat(system, user, key=None):
    body = {
        "model": "m",
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
    }
    if key is not None:
        body["prompt_cache_key"] = key
    return body


def test_openai_prefix_hits_on_the_second_request_only():
    cache = PromptCache()
    assert cache.account("chat_completion", chat(LONG, "a"), 10_000) == (0, 0)
    read, write = cache.account("chat_completion", chat(LONG, "b"), 10_000)
    assert write == 0 and read >= len(LONG) // 4 - 64 and read % 32 == 0


def test_openai_volatile_first_line_defeats_the_cache_and_keys_shard_it():
    cache = PromptCache()
    cache.account("chat_completion", chat("date: 1\n" + LONG, "a"), 10_000)
    assert cache.account("chat_completion", chat("date: 2\n" + LONG, "a"), 10_000) == (0, 0)
    cache.account(
        "responses", {"input": [{"role": "system", "content": LONG}], "prompt_cache_key": "k1"}, 10_000
    )
    assert cache.account(
        "responses", {"input": [{"role": "system", "content": LONG}], "prompt_cache_key": "k2"}, 10_000
    ) == (0, 0)
    assert (
        cache.account(
            "responses", {"input": [{"role": "system", "content": LONG}], "prompt_cache_key": "k1"}, 10_000
        )[0]
        > 0
    )


def test_anthropic_needs_a_marker_then_writes_then_reads():
    cache = PromptCache()
    plain = {"system": LONG, "messages": [{"role": "user", "content": "a"}]}
    assert cache.account("messages", plain, 10_000) == (0, 0)
    marked = {
        "system": [{"type": "text", "text": LONG, "cache_control": {"type": "ephemeral"}}],
        "messages": [{"role": "user", "content": "a"}],
    }
    read, write = cache.account("messages", marked, 10_000)
    assert read == 0 and write > 250
    marked["messages"][0]["content"] = "b"
    assert cache.account("messages", marked, 10_000) == (write, 0)


def test_anthropic_look_back_finds_the_previous_turns_breakpoint():
    cache = PromptCache()
    turn1 = {
        "system": LONG,
        "messages": [
            {
                "role": "user",
                "content": [{"type": "text", "text": "q1", "cache_control": {"type": "ephemeral"}}],
            }
        ],
    }
    _, w1 = cache.account("messages", turn1, 10_000)
    turn2 = {
        "system": LONG,
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "q1"}]},
            {"role": "assistant", "content": "a1"},
            {"role": "user", "content": "q2"},
        ],
        "cache_control": {"type": "ephemeral"},
    }
    read, write = cache.account("messages", turn2, 10_000)
    assert read == w1 and 0 < write < 40


def test_clamped_to_input_tokens_and_gemini_reports_nothing():
    cache = PromptCache()
    marked = {
        "system": [{"type": "text", "text": LONG, "cache_control": {"type": "ephemeral"}}],
        "messages": [],
    }
    assert cache.account("messages", marked, 5) == (0, 5)
    assert cache.account("gemini", {"contents": []}, 5) == (0, 0)
