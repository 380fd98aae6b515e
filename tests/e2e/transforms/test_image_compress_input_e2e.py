"""image_compress_input end to end: an ``openai`` SDK Chat client sends a 300x200 PNG as a data URL
to a model whose upstream speaks Anthropic Messages; the upstream receives a 60x40 WebP (the rule
re-encoded it on the image pool). Without the rule the upstream gets the original bytes."""

from __future__ import annotations

import base64
import io

from PIL import Image

from tests.e2e.transforms.rules import RuleSpec, last_upstream_body, openai_client, setup


def _png(size=(300, 200)) -> str:
    out = io.BytesIO()
    Image.effect_noise(size, 60).convert("RGB").save(out, "PNG")
    return base64.b64encode(out.getvalue()).decode()


def _upstream_image(mock_upstream) -> dict:
    content = last_upstream_body(mock_upstream)["messages"][0]["content"]
    return next(block for block in content if block["type"] == "image")["source"]


def _ask(gateway, s, data, stream=False):
    messages = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "what is this?"},
                {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{data}"}},
            ],
        }
    ]
    client = openai_client(gateway, s.secret)
    if stream:
        return "".join(
            c.choices[0].delta.content or ""
            for c in client.chat.completions.create(model=s.model, messages=messages, stream=True)
            if c.choices
        )
    return client.chat.completions.create(model=s.model, messages=messages).choices[0].message.content


def test_request_image_is_resized_and_reencoded(gateway, mock_upstream):
    s = setup(
        mock_upstream,
        "messages",
        "ici",
        [RuleSpec("image_compress_input", config={"max_edge_px": 60, "output_format": "webp"})],
    )
    gateway.wait_config()
    data = _png()
    for stream in (False, True):
        assert _ask(gateway, s, data, stream=stream) == "Echo: what is this?"
        src = _upstream_image(mock_upstream)
        assert src["media_type"] == "image/webp"
        assert Image.open(io.BytesIO(base64.b64decode(src["data"]))).size == (60, 40)


def test_without_the_rule_the_original_goes_upstream(gateway, mock_upstream):
    s = setup(mock_upstream, "messages", "ici-off")
    gateway.wait_config()
    data = _png()
    _ask(gateway, s, data)
    assert _upstream_image(mock_upstream) == {"type": "base64", "media_type": "image/png", "data": data}
