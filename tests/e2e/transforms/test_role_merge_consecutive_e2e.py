"""role_merge_consecutive end to end: an ``openai`` SDK Chat Completions client sends two user
messages in a row; the provider's upstream speaks Anthropic Messages. Without the rule the
gateway folds them into one Messages turn with two text blocks; with it the texts are merged into
one block (no separator, as the reference does), while an image between texts breaks the run.
"""

from __future__ import annotations

from tests.e2e.transforms.rules import RuleSpec, last_upstream_body, openai_client, setup

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="


def test_consecutive_user_texts_are_merged(gateway, mock_upstream):
    s = setup(mock_upstream, "messages", "rmc", [RuleSpec("role_merge_consecutive")])
    gateway.wait_config()
    client = openai_client(gateway, s.secret)
    reply = client.chat.completions.create(
        model=s.model,
        messages=[
            {"role": "user", "content": "first part. "},
            {"role": "user", "content": "second part."},
            {"role": "assistant", "content": "ok"},
            {"role": "user", "content": "go on"},
        ],
    )
    assert reply.choices[0].message.content == "Echo: go on"
    assert last_upstream_body(mock_upstream)["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "first part. second part."}]},
        {"role": "assistant", "content": [{"type": "text", "text": "ok"}]},
        {"role": "user", "content": [{"type": "text", "text": "go on"}]},
    ]

    client.chat.completions.create(
        model=s.model,
        messages=[
            {"role": "user", "content": "look "},
            {
                "role": "user",
                "content": [{"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}}],
            },
            {"role": "user", "content": "at this"},
        ],
    )
    blocks = last_upstream_body(mock_upstream)["messages"][0]["content"]
    assert [b["type"] for b in blocks] == ["text", "image", "text"]
    assert [b["text"] for b in blocks if b["type"] == "text"] == ["look ", "at this"]


def test_responses_client_to_chat_upstream(gateway, mock_upstream):
    """Two user input items from an ``openai`` SDK Responses client reach a Chat Completions
    upstream as one user message with one text."""
    s = setup(mock_upstream, "chat_completion", "rmc-resp", [RuleSpec("role_merge_consecutive")])
    gateway.wait_config()
    reply = openai_client(gateway, s.secret).responses.create(
        model=s.model,
        input=[{"role": "user", "content": "first part. "}, {"role": "user", "content": "second part."}],
    )
    assert reply.output_text == "Echo: first part. second part."
    assert last_upstream_body(mock_upstream)["messages"] == [
        {"role": "user", "content": "first part. second part."}
    ]
