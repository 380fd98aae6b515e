"""Images in captures: large base64 images become placeholders (JSON bodies, URP dumps and SSE
frames alike), each distinct image keeps a small thumbnail the viewer shows, other base64 and
small images are left alone, corrupt images never drop the capture, and rule notes are kept."""

from __future__ import annotations

import base64
import io

import orjson
import pytest
from django.contrib.auth.models import Permission, User
from PIL import Image

from captures import dump
from captures.images import ImageBounder
from gateway.images.samples import PNG_RGB_8
from tests.captures.helpers import record, stored


def big_png(size=(200, 100)) -> str:
    out = io.BytesIO()
    Image.effect_noise(size, 50).convert("RGB").save(out, "PNG")
    return base64.b64encode(out.getvalue()).decode()


def test_placeholders_in_values_and_frames_with_one_thumbnail_per_image():
    data = big_png()
    b = ImageBounder()
    value = b.bound(
        {
            "messages": [
                {"content": [{"type": "image_url", "image_url": {"url": f"data:image/png;base64,{data}"}}]}
            ],
            "b64_json": data,
            "small": f"data:image/png;base64,{PNG_RGB_8}",
        }
    )
    url = value["messages"][0]["content"][0]["image_url"]["url"]
    assert url.startswith("data:image/png;base64,<image image/png, ") and "sha256:" in url
    assert value["b64_json"].startswith("<image image/png, ") and len(value["b64_json"]) < 100
    assert value["small"] == f"data:image/png;base64,{PNG_RGB_8}"
    frame = b.bound_str('data: {"type":"response.output_item.done","item":{"result":"' + data + '"}}')
    assert data not in frame and "<image image/png" in frame
    thumbs = b.thumbnails()
    assert len(thumbs) == 2  # the big image once, the small one once
    big = next(t for t in thumbs if t["base64_chars"] == len(data))
    assert (big["width"], big["height"]) == (200, 100) and big["thumbnail"].startswith(
        "data:image/webp;base64,"
    )
    assert big["sha256"] in value["b64_json"]


def test_other_base64_and_corrupt_images():
    secretish = base64.b64encode(b"\x00\x01encrypted reasoning" * 200).decode()
    corrupt = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"garbage" * 400).decode()
    b = ImageBounder()
    assert b.bound({"encrypted_content": secretish}) == {"encrypted_content": secretish}
    out = b.bound({"data": corrupt})
    assert out["data"].startswith("<image image/png")
    assert "error" in b.thumbnails()[0]


@pytest.mark.django_db
def test_dump_and_viewer_show_thumbnails_and_notes(client):
    data = big_png()
    rec = record("img-1")
    rec.client_request = {
        "model": "m",
        "messages": [
            {
                "role": "user",
                "content": [{"type": "image_url", "image_url": {"url": f"data:image/png;base64,{data}"}}],
            }
        ],
    }
    rec.attempts[0].upstream_request = {
        "messages": [
            {
                "content": [
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}}
                ]
            }
        ]
    }
    rec.attempts[0].notes = ["image_compress_input: left: re-encoded image was not smaller"]
    raw, _ = dump.build(rec)
    assert data.encode() not in raw
    parsed = orjson.loads(raw)
    assert len(parsed["image_thumbnails"]) == 1
    assert parsed["attempts"][0]["notes"] == ["image_compress_input: left: re-encoded image was not smaller"]
    stored(rec)
    user = User.objects.create_user("viewer", password="pw", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_capture"))
    client.force_login(user)
    page = client.get("/captures/img-1/").content.decode()
    assert 'id="images"' in page and "data:image/webp;base64," in page
    assert "left: re-encoded image was not smaller" in page
