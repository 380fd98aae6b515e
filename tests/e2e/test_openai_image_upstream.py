"""A Chat, Responses or Messages client asking a model served by an ``openai_image`` upstream gets
the generated image in its own protocol's shape; a user image turns the call into an edit."""

from __future__ import annotations

import base64

from gateway.images.samples import PNG_RGB_8
from tests.e2e.transforms.rules import anthropic_client, last_upstream_body, openai_client, post_raw, setup


def test_chat_client_gets_an_image_part(gateway, mock_upstream):
    s = setup(mock_upstream, "openai_image", "img-chat")
    gateway.wait_config()
    reply = openai_client(gateway, s.secret).chat.completions.create(
        model=s.model, messages=[{"role": "user", "content": "a red square"}]
    )
    content = reply.choices[0].message.content
    assert content == [{"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG_RGB_8}"}}]
    record = mock_upstream.requests()[-1]
    assert record["route"] == "/v1/images/generations"
    assert record["body"] == {"model": "up-img-chat", "prompt": "a red square"}
    assert reply.usage.prompt_tokens == 3 and reply.usage.completion_tokens == 16


def test_chat_stream_client_is_served_from_a_whole_images_call(gateway, mock_upstream):
    """Chat streams have no image delta: the stream ends cleanly, and image_output_to_markdown is
    the rule that makes the image visible there (see its e2e test)."""
    s = setup(mock_upstream, "openai_image", "img-chat-stream")
    gateway.wait_config()
    response = post_raw(
        gateway,
        s.secret,
        "/v1/chat/completions",
        {"model": s.model, "messages": [{"role": "user", "content": "a red square"}], "stream": True},
    )
    assert response.status_code == 200
    assert '"finish_reason":"stop"' in response.text and response.text.endswith("data: [DONE]\n\n")
    assert "stream" not in last_upstream_body(mock_upstream)  # the Images API is called whole


def test_responses_client_gets_an_image_generation_call(gateway, mock_upstream):
    s = setup(mock_upstream, "openai_image", "img-resp")
    gateway.wait_config()
    reply = openai_client(gateway, s.secret).responses.create(model=s.model, input="a red square")
    items = [item for item in reply.output if item.type == "image_generation_call"]
    assert len(items) == 1 and items[0].result == PNG_RGB_8


def test_messages_client_with_an_image_gets_an_edit(gateway, mock_upstream):
    s = setup(mock_upstream, "openai_image", "img-msg")
    gateway.wait_config()
    reply = anthropic_client(gateway, s.secret).messages.create(
        model=s.model,
        max_tokens=64,
        messages=[
            {
                "role": "user",
                "content": [
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/png", "data": PNG_RGB_8},
                    },
                    {"type": "text", "text": "make it blue"},
                ],
            }
        ],
    )
    block = reply.content[0]
    source = block.source if isinstance(block.source, dict) else block.source.model_dump()
    assert block.type == "image" and source["data"] == PNG_RGB_8
    record = mock_upstream.requests()[-1]
    assert record["route"] == "/v1/images/edits"
    assert record["body"]["prompt"] == "make it blue"
    assert base64.b64decode(record["body"]["image"][0]["b64"]) == base64.b64decode(PNG_RGB_8)
