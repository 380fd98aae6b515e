"""image_compress_output: assistant images, tool-result images (masks skipped) and function-call
arguments in responses; streams are served whole; the async path uses the image pool."""

from __future__ import annotations

import base64
import io

import orjson
import pytest
from PIL import Image

from gateway.images import compress as compress_mod
from gateway.images.samples import PNG_RGB_8
from gateway.urp import ImageNode, MediaSource, Response, ToolCallNode, ToolResultNode
from transforms.base import TransformContext
from transforms.engine import CompiledRule, run_response_async
from transforms.registry import registry

TYPE_ID = "image_compress_output"


@pytest.fixture(autouse=True)
def _fresh_cache():
    compress_mod.CACHE.clear()


def ctx(stream=False):
    return TransformContext(logical_model="m", client_protocol="responses", stream=stream)


def noisy(size=(300, 200)) -> str:
    out = io.BytesIO()
    Image.effect_noise(size, 60).convert("RGB").save(out, "PNG")
    return base64.b64encode(out.getvalue()).decode()


def size_of(b64: str) -> tuple[int, int]:
    return Image.open(io.BytesIO(base64.b64decode(b64))).size


def img(role, data, **kw):
    return ImageNode(role=role, source=MediaSource(kind="base64", media_type="image/png", data=data), **kw)


def test_assistant_and_tool_result_images_compressed_masks_and_user_images_not():
    data = noisy()
    assistant, user = img("assistant", data), img("user", data)
    entry, mask = img("user", data), img("user", data, extra={"metadata": {"image_mask": True}})
    resp = Response(
        id="r", model="m", output=[assistant, user, ToolResultNode(call_id="c", content=[entry, mask])]
    )
    registry()[TYPE_ID]({"max_edge_px": 30, "output_format": "webp"}).apply_response(resp, ctx())
    assert assistant.source.media_type == "image/webp" and size_of(assistant.source.data) == (30, 20)
    assert entry.source.media_type == "image/webp"
    assert user.source.data == data and mask.source.data == data


def test_function_call_arguments_and_terminal_stream_mode():
    data = noisy()
    call = ToolCallNode(
        call_id="c", name="f", arguments=orjson.dumps({"image": f"data:image/png;base64,{data}"}).decode()
    )
    t = registry()[TYPE_ID]({"max_edge_px": 20, "output_format": "png"})
    t.apply_response(Response(id="r", model="m", output=[call]), ctx())
    new = orjson.loads(call.arguments)["image"]
    assert new.startswith("data:image/png;base64,") and size_of(new.split(",", 1)[1]) == (20, 13)
    assert t.needs_whole_response(ctx(stream=True))  # re-encoding never runs between stream events


async def test_async_path():
    data = noisy()
    node = img("assistant", data)
    rule = CompiledRule(1, "provider", "response", None, registry()[TYPE_ID]({"max_edge_px": 10}))
    c = ctx()
    await run_response_async([rule], Response(id="r", model="m", output=[node]), c)
    assert size_of(node.source.data) == (10, 7)
    assert any("compressed" in n for n in c.shared["notes"])


def test_metadata():
    cls = registry()[TYPE_ID]
    assert cls.phases == ("response",) and cls.scopes == ("provider", "api_key")
    assert cls.validate_config({"output_format": "jpegxl"})
    assert PNG_RGB_8 in str(cls.examples[0].input)
