"""image_enable_openai_generation_tool end to end: a Chat client (no way to ask for the hosted tool)
talks to a Responses upstream; the rule adds the image_generation tool, the upstream generates,
the client gets the image. With force_stream the upstream is called streaming and the
non-streaming client still gets one completion. Without the rule: no tool, no image."""

from __future__ import annotations

from gateway.images.samples import PNG_RGB_8
from tests.e2e.transforms.rules import RuleSpec, last_upstream_body, openai_client, setup

IMAGE_PART = {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG_RGB_8}"}}


def _content(gateway, s, stream=False):
    return (
        openai_client(gateway, s.secret)
        .chat.completions.create(model=s.model, messages=[{"role": "user", "content": "draw a red square"}])
        .choices[0]
        .message.content
    )


def test_chat_client_gets_a_generated_image(gateway, mock_upstream):
    s = setup(
        mock_upstream,
        "responses",
        "eigt",
        [
            RuleSpec(
                "image_enable_openai_generation_tool",
                config={"output_format": "png", "force_tool_choice": True},
            )
        ],
    )
    gateway.wait_config()
    content = _content(gateway, s)
    assert IMAGE_PART in content
    body = last_upstream_body(mock_upstream)
    assert body["tools"] == [{"type": "image_generation", "output_format": "png"}]
    assert body["tool_choice"] == {"type": "image_generation"}


def test_force_stream_upstream_streams_with_partial_images(gateway, mock_upstream):
    s = setup(
        mock_upstream,
        "responses",
        "eigt-stream",
        [RuleSpec("image_enable_openai_generation_tool", config={"force_stream": True})],
    )
    gateway.wait_config()
    assert IMAGE_PART in _content(gateway, s)
    body = last_upstream_body(mock_upstream)
    assert body["stream"] is True
    assert body["tools"] == [{"type": "image_generation", "output_format": "png", "partial_images": 3}]


def test_without_the_rule_no_tool_and_no_image(gateway, mock_upstream):
    s = setup(mock_upstream, "responses", "eigt-off")
    gateway.wait_config()
    content = _content(gateway, s)
    assert content == "Echo: draw a red square"
    assert "tools" not in last_upstream_body(mock_upstream)
