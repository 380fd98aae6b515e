"""image_compress_input: the reference's examples and the pipeline's edge cases (resize, EXIF
orientation, corrupt images, decompression bombs, formats), sync and on the image pool."""

from __future__ import annotations

import base64
import io
import struct
import threading
import zlib

import orjson
import pytest
from PIL import Image

from gateway.images import compress as compress_mod
from gateway.images.samples import PNG_RGB_8, PNG_RGBA_1
from gateway.urp import ImageNode, MediaSource, Request, TextNode, ToolCallNode, ToolResultNode
from transforms.base import TransformContext, TransformFailed
from transforms.engine import CompiledRule, run_request_async
from transforms.registry import registry

TYPE_ID = "image_compress_input"


@pytest.fixture(autouse=True)
def _fresh_cache():
    compress_mod.CACHE.clear()
    yield
    compress_mod.CACHE.clear()


def ctx():
    return TransformContext(logical_model="m", client_protocol="chat_completion")


def make(config):
    return registry()[TYPE_ID](config)


def b64_image(img: Image.Image, fmt: str = "PNG", **kw) -> str:
    out = io.BytesIO()
    img.save(out, fmt, **kw)
    return base64.b64encode(out.getvalue()).decode()


def decode(b64: str) -> Image.Image:
    return Image.open(io.BytesIO(base64.b64decode(b64)))


def user_b64(data, mt="image/png"):
    return ImageNode(role="user", source=MediaSource(kind="base64", media_type=mt, data=data))


def user_url(url, detail=None):
    return ImageNode(role="user", source=MediaSource(kind="url", url=url, detail=detail))


# -- reference examples ----------------------------------------------------------------------------


def test_example_1_tool_results_and_function_arguments():
    args = orjson.dumps(
        {
            "nested": [
                f"data:image/jpeg;base64,{PNG_RGB_8}",
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/jpeg", "data": PNG_RGB_8},
                    "detail": "high",
                },
            ],
            "untouched": "keep",
        }
    ).decode()
    custom_args = f"data:image/jpeg;base64,{PNG_RGB_8}"
    req = Request(
        model="m",
        input=[
            user_b64(PNG_RGB_8),
            ToolResultNode(
                call_id="c1",
                content=[
                    ImageNode(
                        role="user",
                        source=MediaSource(kind="base64", media_type="image/jpeg", data=PNG_RGB_8),
                    )
                ],
            ),
            ToolCallNode(call_id="c2", name="f", arguments=args),
            ToolCallNode(call_id="c3", name="g", arguments=custom_args, tool_type="custom"),
        ],
    )
    make({"output_format": "png", "skip_if_smaller": False}).apply_request(req, ctx())
    assert req.input[0].source.media_type == "image/png"
    assert req.input[1].content[0].source.media_type == "image/png"
    new_args = orjson.loads(req.input[2].arguments)
    assert new_args["nested"][0].startswith("data:image/png;base64,")
    assert new_args["nested"][1]["source"]["media_type"] == "image/png"
    assert new_args["nested"][1]["detail"] == "high" and new_args["untouched"] == "keep"
    assert req.input[3].arguments == custom_args  # custom tool input is byte-identical


def test_example_2_alpha_never_becomes_jpeg():
    node = user_url(f"data:image/png;base64,{PNG_RGBA_1}")
    req = Request(model="m", input=[node])
    make({"output_format": "jpg", "max_edge_px": 1, "skip_if_smaller": False}).apply_request(req, ctx())
    assert node.source.url == f"data:image/png;base64,{PNG_RGBA_1}"


def test_example_3_a_mask_leaves_the_whole_request_alone():
    big = b64_image(Image.new("RGB", (64, 64), "blue"))
    user = user_b64(big)
    mask = ImageNode(
        role="user",
        source=MediaSource(kind="base64", media_type="image/png", data=big),
        extra={"metadata": {"image_mask": True}},
    )
    req = Request(model="m", input=[user, ToolResultNode(call_id="c", content=[mask])])
    make({"output_format": "png", "max_edge_px": 8, "skip_if_smaller": False}).apply_request(req, ctx())
    assert user.source.data == big and mask.source.data == big


def test_example_4_declared_jpeg_png_bytes_keeps_bytes_fixes_type():
    node = user_url(f"data:image/jpeg;base64,{PNG_RGB_8}", detail="high")
    make({"output_format": "jpg"}).apply_request(Request(model="m", input=[node]), ctx())
    assert node.source.url == f"data:image/png;base64,{PNG_RGB_8}"
    assert node.source.detail == "high"


# -- the pipeline ------------------------------------------------------------------------------------


def test_resize_fits_max_edge_keeping_aspect_and_representation():
    data = b64_image(Image.effect_noise((400, 200), 60).convert("RGB"))
    node = user_url(f"data:image/png;base64,{data}", detail="low")
    make({"max_edge_px": 100, "output_format": "webp"}).apply_request(Request(model="m", input=[node]), ctx())
    assert node.source.kind == "url" and node.source.detail == "low"
    assert node.source.url.startswith("data:image/webp;base64,")
    assert decode(node.source.url.split(",", 1)[1]).size == (100, 50)


def test_exif_orientation_applied():
    img = Image.new("RGB", (40, 20), "green")
    exif = Image.Exif()
    exif[0x0112] = 6  # rotate 90 degrees clockwise on display
    data = b64_image(img, "JPEG", exif=exif.tobytes())
    node = user_b64(data, "image/jpeg")
    make({"output_format": "png", "skip_if_smaller": False}).apply_request(
        Request(model="m", input=[node]), ctx()
    )
    assert decode(node.source.data).size == (20, 40)


def test_original_format_and_skip_if_smaller():
    noisy = b64_image(Image.effect_noise((64, 64), 80).convert("RGB"), "JPEG", quality=100)
    node = user_b64(noisy, "image/jpeg")
    make({"jpeg_quality": 20}).apply_request(Request(model="m", input=[node]), ctx())
    assert node.source.media_type == "image/jpeg"
    assert len(node.source.data) < len(noisy)
    tiny = user_b64(PNG_RGB_8)  # cannot get smaller: left exactly as it was
    make({}).apply_request(Request(model="m", input=[tiny]), ctx())
    assert tiny.source.data == PNG_RGB_8


def test_other_roles_urls_and_unsupported_types_untouched():
    gif = base64.b64encode(b"GIF89a....").decode()
    nodes = [
        ImageNode(
            role="assistant", source=MediaSource(kind="base64", media_type="image/png", data=PNG_RGB_8)
        ),
        user_url("https://example.com/a.png"),
        user_b64(gif, "image/gif"),
        user_url("data:text/plain;base64,QUJD"),
        TextNode(role="user", content="hi"),
    ]
    before = [(getattr(n, "source", None) and (n.source.url, n.source.data)) for n in nodes]
    make({"output_format": "png", "skip_if_smaller": False}).apply_request(
        Request(model="m", input=nodes), ctx()
    )
    assert [(getattr(n, "source", None) and (n.source.url, n.source.data)) for n in nodes] == before


def _png_header_only(width: int, height: int) -> str:
    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    data = (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(b"\0" * 16))
        + chunk(b"IEND", b"")
    )
    return base64.b64encode(data).decode()


@pytest.mark.parametrize(
    "data,note",
    [
        (_png_header_only(7000, 7000), "decode limit"),  # 49 Mpx: over the 40 Mpx guard, never decoded
        (_png_header_only(30000, 30000), "bomb"),  # over Pillow's own bomb limit too
        (_png_header_only(64, 64), "corrupt"),  # valid header, truncated pixel data
        (base64.b64encode(b"\x89PNG\r\n\x1a\nnot really").decode(), "corrupt"),
        ("!!!not base64!!!", "invalid base64"),
    ],
)
def test_bombs_and_corrupt_images_left_untouched_and_noted(data, note):
    node = user_b64(data)
    c = ctx()
    make({"output_format": "webp", "max_edge_px": 10, "skip_if_smaller": False}).apply_request(
        Request(model="m", input=[node]), c
    )
    assert node.source.data == data
    assert any(note in n for n in c.shared["notes"]), c.shared


def test_jpeg_xl_refused_at_save_and_at_apply():
    cls = registry()[TYPE_ID]
    assert cls.validate_config({"output_format": "jpegxl"}) == [
        ("output_format", "jpeg xl support is disabled in this build")
    ]
    assert cls.validate_config({"max_edge_px": 0})
    assert cls.validate_config({"jpegxl_quality": 100})
    with pytest.raises(TransformFailed, match="jpeg xl"):
        cls({"output_format": "jpegxl_lossless"}).apply_request(
            Request(model="m", input=[user_b64(PNG_RGB_8)]), ctx()
        )


def test_metadata_and_scopes():
    cls = registry()[TYPE_ID]
    assert cls.phases == ("request",) and cls.scopes == ("provider", "api_key")
    assert cls.name["zh"] and cls.description["zh"] and cls.examples


async def test_async_path_runs_on_the_image_pool_threads():
    seen = []
    real = compress_mod.compress_source

    def spy(*args):
        seen.append(threading.current_thread().name)
        return real(*args)

    data = b64_image(Image.effect_noise((300, 300), 60).convert("RGB"))
    nodes = [user_b64(data) for _ in range(3)]
    rule = CompiledRule(1, "provider", "request", None, make({"max_edge_px": 50, "output_format": "webp"}))
    import gateway.images.sites as sites_mod
    from gateway.images import pool

    orig = sites_mod.compress_source
    sites_mod.compress_source = spy
    pool.use("thread")  # the spy is not picklable: threads for this test
    try:
        await run_request_async([rule], Request(model="m", input=nodes), ctx())
    finally:
        sites_mod.compress_source = orig
        pool.use(None)
    assert len(seen) == 3 and all(name.startswith("gateway-image") for name in seen)
    assert all(decode(n.source.data).size == (50, 50) for n in nodes)


async def test_async_path_on_the_default_process_pool():
    from gateway.images import pool

    pool.use("process")
    try:
        data = b64_image(Image.effect_noise((300, 300), 60).convert("RGB"))
        node = user_b64(data)
        rule = CompiledRule(1, "provider", "request", None, make({"max_edge_px": 30, "output_format": "png"}))
        c = ctx()
        await run_request_async([rule], Request(model="m", input=[node]), c)
        assert decode(node.source.data).size == (30, 30)
        with pytest.raises(TransformFailed, match="jpeg xl"):  # errors come back from the worker process
            bad = CompiledRule(1, "provider", "request", None, make({"output_format": "jpegxl"}))
            await run_request_async([bad], Request(model="m", input=[user_b64(data)]), ctx())
    finally:
        pool.use(None)


def _crash(*args):
    import os

    os._exit(1)  # a worker killed mid-image (OOM killer, codec crash)


async def test_a_crashed_worker_leaves_the_image_and_the_pool_recovers(monkeypatch):
    from gateway.images import pool
    from gateway.images import sites as sites_mod

    pool.use("process")
    try:
        data = b64_image(Image.effect_noise((64, 64), 60).convert("RGB"))
        node = user_b64(data)
        monkeypatch.setattr(sites_mod, "compress_source", _crash)
        c = ctx()
        rule = CompiledRule(1, "provider", "request", None, make({"max_edge_px": 8, "output_format": "png"}))
        await run_request_async([rule], Request(model="m", input=[node]), c)
        assert node.source.data == data and any("image worker failed" in n for n in c.shared["notes"])
        monkeypatch.undo()
        await run_request_async([rule], Request(model="m", input=[node]), ctx())
        assert decode(node.source.data).size == (8, 8)  # a fresh pool serves the next request
    finally:
        pool.use(None)
