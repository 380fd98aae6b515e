"""prompt_append_empty_user end to end, as an API-key rule: an ``openai`` SDK Chat Completions
client ends its conversation on an assistant message (a prefill); the provider's upstream speaks
Anthropic Messages. The key's rule appends a user turn with the configured text; a conversation
that already ends on a user turn is left alone.
"""

from __future__ import annotations

from tests.e2e.transforms.rules import RuleSpec, last_upstream_body, openai_client, setup


def test_api_key_rule_appends_a_user_turn_after_an_assistant_prefill(gateway, mock_upstream):
    s = setup(
        mock_upstream,
        "messages",
        "paeu-key",
        [RuleSpec("prompt_append_empty_user", config={"content": "continue"}, scope="api_key")],
    )
    gateway.wait_config()
    client = openai_client(gateway, s.secret)
    reply = client.chat.completions.create(
        model=s.model, messages=[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Hello"}]
    )
    assert reply.choices[0].message.content == "Echo: continue"
    assert last_upstream_body(mock_upstream)["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "hi"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "Hello"}]},
        {"role": "user", "content": [{"type": "text", "text": "continue"}]},
    ]

    client.chat.completions.create(model=s.model, messages=[{"role": "user", "content": "just me"}])
    assert last_upstream_body(mock_upstream)["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "just me"}]}
    ]


def test_rule_of_another_key_does_not_run(gateway, mock_upstream):
    from tests.servers import make_key

    s = setup(
        mock_upstream,
        "messages",
        "paeu-other",
        [RuleSpec("prompt_append_empty_user", config={"content": "continue"}, scope="api_key")],
    )
    _, other_secret = make_key("no-rules")
    gateway.wait_config()
    openai_client(gateway, other_secret).chat.completions.create(
        model=s.model, messages=[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Hello"}]
    )
    assert last_upstream_body(mock_upstream)["messages"][-1] == {
        "role": "assistant",
        "content": [{"type": "text", "text": "Hello"}],
    }


def test_gemini_upstream_gets_a_trailing_user_turn(gateway, mock_upstream):
    """The same through an ``anthropic`` SDK Messages client to a Gemini upstream (``contents``
    must end on a ``user`` turn there), with the default content (one space)."""
    from tests.e2e.transforms.rules import anthropic_client

    s = setup(mock_upstream, "gemini", "paeu-gemini", [RuleSpec("prompt_append_empty_user", scope="api_key")])
    gateway.wait_config()
    anthropic_client(gateway, s.secret).messages.create(
        model=s.model,
        max_tokens=64,
        messages=[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Hello"}],
    )
    contents = last_upstream_body(mock_upstream)["contents"]
    assert [c["role"] for c in contents] == ["user", "model", "user"]
    assert contents[-1]["parts"] == [{"text": " "}]
