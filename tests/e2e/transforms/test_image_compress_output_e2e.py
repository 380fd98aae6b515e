"""image_compress_output end to end: the Responses upstream's image generation tool answers with an
8x8 PNG; with ``max_edge_px: 4`` a Messages client (non-stream) and a Responses client (stream,
served whole by the rule) get a 4x4 image. Without the rule the 8x8 original arrives."""

from __future__ import annotations

import base64
import io

from PIL import Image

from gateway.images.samples import PNG_RGB_8
from tests.e2e.transforms.rules import RuleSpec, anthropic_client, last_upstream_body, openai_client, setup

TOOL_RULE = RuleSpec("image_enable_openai_generation_tool")


def _size(b64: str) -> tuple[int, int]:
    return Image.open(io.BytesIO(base64.b64decode(b64))).size


def _messages_image(gateway, s) -> str:
    reply = anthropic_client(gateway, s.secret).messages.create(
        model=s.model, max_tokens=64, messages=[{"role": "user", "content": "draw"}]
    )
    block = next(b for b in reply.content if b.type == "image")
    source = block.source if isinstance(block.source, dict) else block.source.model_dump()
    return source["data"]


def test_response_image_is_shrunk_whole_and_streamed(gateway, mock_upstream):
    s = setup(
        mock_upstream,
        "responses",
        "ico",
        [
            TOOL_RULE,
            RuleSpec(
                "image_compress_output",
                phase="response",
                config={"max_edge_px": 4, "output_format": "png", "skip_if_smaller": False},
            ),
        ],
    )
    gateway.wait_config()
    assert _size(_messages_image(gateway, s)) == (4, 4)
    with openai_client(gateway, s.secret).responses.stream(model=s.model, input="draw") as stream:
        final = stream.get_final_response()
    image = next(item for item in final.output if item.type == "image_generation_call")
    assert _size(image.result) == (4, 4)
    assert last_upstream_body(mock_upstream)["stream"] is False  # served whole for the streaming client


def test_without_the_rule_the_original_arrives(gateway, mock_upstream):
    s = setup(mock_upstream, "responses", "ico-off", [TOOL_RULE])
    gateway.wait_config()
    assert _messages_image(gateway, s) == PNG_RGB_8
