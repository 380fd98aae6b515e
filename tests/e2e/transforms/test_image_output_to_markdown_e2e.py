"""image_output_to_markdown end to end: a Chat client (which shows text) asks a model served by an
``openai_image`` upstream; the image arrives as Markdown in the message text, non-stream and
stream (the Images API is called whole, so the synthesised stream carries the Markdown)."""

from __future__ import annotations

from gateway.images.samples import PNG_RGB_8
from tests.e2e.transforms.rules import RuleSpec, openai_client, setup

MARKDOWN = f"![image](data:image/png;base64,{PNG_RGB_8})"


def test_image_becomes_markdown_text(gateway, mock_upstream):
    s = setup(mock_upstream, "openai_image", "o2m", [RuleSpec("image_output_to_markdown", phase="response")])
    gateway.wait_config()
    client = openai_client(gateway, s.secret)
    messages = [{"role": "user", "content": "a red square"}]
    content = client.chat.completions.create(model=s.model, messages=messages).choices[0].message.content
    texts = [p["text"] for p in content if p["type"] == "text"] if isinstance(content, list) else [content]
    assert texts == [MARKDOWN]
    streamed = "".join(
        c.choices[0].delta.content or ""
        for c in client.chat.completions.create(model=s.model, messages=messages, stream=True)
        if c.choices
    )
    assert streamed == MARKDOWN


def test_without_the_rule_no_text(gateway, mock_upstream):
    s = setup(mock_upstream, "openai_image", "o2m-off")
    gateway.wait_config()
    streamed = "".join(
        c.choices[0].delta.content or ""
        for c in openai_client(gateway, s.secret).chat.completions.create(
            model=s.model, messages=[{"role": "user", "content": "x"}], stream=True
        )
        if c.choices
    )
    assert streamed == ""
