"""image_markdown_to_output end to end: a Chat Completions upstream answers with Markdown image
links (scripted on the mock); a Messages client gets text plus image blocks (its streams carry no
image blocks, so a streaming Messages client gets the cleaned text), a streaming Responses client
gets an image output item (base64 images only: Responses has no URL image output). Without the rule the Markdown stays."""

from __future__ import annotations

from gateway.images.samples import PNG_RGB_8
from tests.e2e.transforms.rules import RuleSpec, anthropic_client, openai_client, setup

TEXT = f"Here: ![red](data:image/png;base64,{PNG_RGB_8}) and ![cat](https://example.com/cat.png)"
RULE = RuleSpec("image_markdown_to_output", phase="response")


def _blocks(content):
    out = []
    for block in content:
        if block.type == "text":
            out.append(("text", block.text))
        else:
            src = block.source if isinstance(block.source, dict) else block.source.model_dump()
            out.append(("image", src.get("data") or src.get("url")))
    return out


def test_markdown_images_become_image_blocks(gateway, mock_upstream):
    s = setup(mock_upstream, "chat_completion", "m2o", [RULE])
    gateway.wait_config()
    mock_upstream.script([{"text": TEXT}, {"text": TEXT}, {"text": TEXT}])
    client = anthropic_client(gateway, s.secret)
    messages = [{"role": "user", "content": "show me"}]
    expected = [("text", "Here:  and "), ("image", PNG_RGB_8), ("image", "https://example.com/cat.png")]
    assert (
        _blocks(client.messages.create(model=s.model, max_tokens=64, messages=messages).content) == expected
    )
    with client.messages.stream(model=s.model, max_tokens=64, messages=messages) as stream:
        final = stream.get_final_message()
    # Anthropic streams have no image block events: the text arrives without the Markdown.
    assert _blocks(final.content) == expected[:1]
    with openai_client(gateway, s.secret).responses.stream(model=s.model, input="show me") as stream:
        reply = stream.get_final_response()
    assert reply.output_text == "Here:  and "
    assert [item.result for item in reply.output if item.type == "image_generation_call"] == [PNG_RGB_8]


def test_without_the_rule_markdown_stays_text(gateway, mock_upstream):
    s = setup(mock_upstream, "chat_completion", "m2o-off")
    gateway.wait_config()
    mock_upstream.script([{"text": TEXT}])
    reply = anthropic_client(gateway, s.secret).messages.create(
        model=s.model, max_tokens=64, messages=[{"role": "user", "content": "show me"}]
    )
    assert _blocks(reply.content) == [("text", TEXT)]
