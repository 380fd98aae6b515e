"""The openai_image codec: generations vs edits, the multipart body, mask, extras, and responses
turned into assistant image nodes."""

from __future__ import annotations

import base64

import orjson
import pytest

from gateway.errors import UpstreamProtocolError
from gateway.images import multipart
from gateway.images.samples import PNG_RGB_8
from gateway.protocols import codec
from gateway.protocols.base import EncodeContext
from gateway.urp import ImageNode, MediaSource, Request, TextNode

C = codec("openai_image")


def enc(req):
    return C.encode_request(req, EncodeContext(model="gpt-image-1", source_protocol="chat_completion"))


def test_text_only_is_a_json_generation_with_joined_prompt_and_whitelisted_extras():
    req = Request(
        model="x",
        input=[
            TextNode(role="system", content="sys"),
            TextNode(role="user", content="a cat"),
            TextNode(role="user", content="in a hat"),
        ],
        extra={"size": "256x256", "n": 2, "unknown": 1},
    )
    raw, ctype, path = C.wire(enc(req))
    assert path == "/v1/images/generations" and ctype == "application/json"
    assert orjson.loads(raw) == {
        "model": "gpt-image-1",
        "prompt": "a cat\nin a hat",
        "n": 2,
        "size": "256x256",
    }
    assert C.SUPPORTS_STREAM is False


def test_user_images_become_a_multipart_edit_with_mask():
    req = Request(
        model="x",
        input=[
            TextNode(role="user", content="make it blue"),
            ImageNode(role="user", source=MediaSource(kind="base64", media_type="image/png", data=PNG_RGB_8)),
            ImageNode(role="user", source=MediaSource(kind="url", url=f"data:image/png;base64,{PNG_RGB_8}")),
            ImageNode(
                role="user",
                id="__monoize_image_api_mask",
                source=MediaSource(kind="base64", media_type="image/png", data=PNG_RGB_8),
            ),
            ImageNode(
                role="user", source=MediaSource(kind="url", url="https://example.com/not-resolved.png")
            ),
        ],
    )
    raw, ctype, path = C.wire(enc(req))
    assert path == "/v1/images/edits" and ctype.startswith("multipart/form-data; boundary=")
    parts = multipart.parse(raw, ctype)
    assert [(p.name, p.filename) for p in parts] == [
        ("model", None),
        ("prompt", None),
        ("image[]", "image-1.png"),
        ("image[]", "image-2.png"),
        ("mask", "mask.png"),
    ]
    assert parts[1].text == "make it blue"
    assert parts[2].data == base64.b64decode(PNG_RGB_8)


def test_response_images_and_usage():
    resp = C.decode_response(
        {
            "created": 5,
            "output_format": "webp",
            "data": [
                {"b64_json": PNG_RGB_8, "revised_prompt": "rp"},
                {"url": "https://x/y.png"},
                {"nothing": 1},
            ],
            "usage": {"input_tokens": 3, "output_tokens": 7, "total_tokens": 10},
        }
    )
    assert [(n.role, n.source.kind) for n in resp.output] == [("assistant", "base64"), ("assistant", "url")]
    assert resp.output[0].source.media_type == "image/webp" and resp.output[0].extra == {
        "revised_prompt": "rp"
    }
    assert resp.usage.input_tokens == 3 and resp.usage.output_tokens == 7
    sniffed = C.decode_response({"data": [{"b64_json": PNG_RGB_8}]})
    assert sniffed.output[0].source.media_type == "image/png"


def test_errors_and_garbage():
    with pytest.raises(UpstreamProtocolError):
        C.decode_response({"error": {"message": "bad", "code": "x"}})
    with pytest.raises(UpstreamProtocolError):
        C.decode_response({"nope": 1})
