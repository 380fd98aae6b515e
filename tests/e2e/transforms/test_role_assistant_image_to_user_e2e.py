"""role_assistant_image_to_user end to end: an ``anthropic`` SDK Messages client replays an
assistant turn that holds an image; the provider's upstream speaks Chat Completions (some of
which accept but silently drop assistant images). The rule moves the image into the next user
message, right before its text; the assistant message keeps only its text.
"""

from __future__ import annotations

from tests.e2e.transforms.rules import RuleSpec, anthropic_client, last_upstream_body, setup

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
IMAGE_URL = f"data:image/png;base64,{PNG}"


def _parts(message: dict) -> list[tuple[str, str]]:
    content = message["content"]
    if isinstance(content, str):
        return [("text", content)]
    return [(p["type"], p["text"] if p["type"] == "text" else p["image_url"]["url"]) for p in content]


def test_assistant_image_moves_into_the_next_user_message(gateway, mock_upstream):
    s = setup(mock_upstream, "chat_completion", "raitu", [RuleSpec("role_assistant_image_to_user")])
    gateway.wait_config()
    reply = anthropic_client(gateway, s.secret).messages.create(
        model=s.model,
        max_tokens=64,
        messages=[
            {"role": "user", "content": "sharing now"},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "shown below"},
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
                ],
            },
            {"role": "user", "content": "what color is it?"},
        ],
    )
    assert reply.content[0].text == "Echo: what color is it?"
    messages = last_upstream_body(mock_upstream)["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert _parts(messages[1]) == [("text", "shown below")]
    assert _parts(messages[2]) == [("image_url", IMAGE_URL), ("text", "what color is it?")]
