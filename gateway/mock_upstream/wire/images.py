"""OpenAI Images API wire (``POST /v1/images/generations`` JSON, ``POST /v1/images/edits``
multipart) and the small test images the mock serves over HTTP (``GET /_mock/images/<name>``).

Images served (deterministic bytes, so tests can compare):

- ``red.png``: 8x8 opaque red PNG (``gateway.images.samples.PNG_RGB_8``);
- ``noise-<w>x<h>.png`` / ``.jpg``: seeded noise of that size (up to 4096 on a side), for
  compression tests and the benchmark;
- anything else: 404.

Generations answer ``n`` images: ``b64_json`` of ``red.png`` by default, ``url`` of
``/_mock/images/red.png`` on this server when ``response_format`` is ``url``. Edits answer the
first uploaded image back (so a test can see what the upstream received), or ``red.png``.
"""

from __future__ import annotations

import base64
import io
import random
import re
from functools import lru_cache
from typing import Any

from gateway.images import multipart
from gateway.images.samples import PNG_RGB_8
from gateway.mock_upstream.wire import openai_error

_NOISE = re.compile(r"^noise-(\d{1,4})x(\d{1,4})\.(png|jpg)$")


def error_body(status: int, message: str) -> dict:
    return openai_error(status, message)


@lru_cache(maxsize=16)
def image_bytes(name: str) -> tuple[bytes, str] | None:
    """(bytes, content type) of a served test image, None when unknown."""
    if name == "red.png":
        return base64.b64decode(PNG_RGB_8), "image/png"
    m = _NOISE.match(name)
    if m is None:
        return None
    w, h, ext = int(m.group(1)), int(m.group(2)), m.group(3)
    if not (0 < w <= 4096 and 0 < h <= 4096):
        return None
    from PIL import Image

    img = Image.frombytes("RGB", (w, h), random.Random(f"{w}x{h}").randbytes(w * h * 3))
    out = io.BytesIO()
    if ext == "png":
        img.save(out, "PNG", compress_level=1)
        return out.getvalue(), "image/png"
    img.save(out, "JPEG", quality=92)
    return out.getvalue(), "image/jpeg"


def form_body(body_bytes: bytes, content_type: str) -> dict[str, Any] | None:
    """An edits form as a dict for the request record and the answer: text fields as strings, files
    as ``{filename, content_type, bytes, b64}`` (lists for repeated names such as ``image[]``)."""
    try:
        parts = multipart.parse(body_bytes, content_type)
    except multipart.MultipartError:
        return None
    out: dict[str, Any] = {}
    for part in parts:
        name = part.name[:-2] if part.name.endswith("[]") else part.name
        if part.filename is not None:
            value: Any = {
                "filename": part.filename,
                "content_type": part.content_type,
                "bytes": len(part.data),
                "b64": base64.b64encode(part.data).decode(),
            }
            if name == "image":
                out.setdefault("image", []).append(value)
                continue
        else:
            value = part.text
        out[name] = value
    return out


def respond(route: str, body: dict[str, Any], base_url: str, created: int) -> dict[str, Any]:
    try:
        n = max(1, min(int(body.get("n") or 1), 10))
    except (TypeError, ValueError):
        n = 1
    if route.endswith("/edits") and body.get("image"):
        first = body["image"][0]
        item: dict[str, Any] = {"b64_json": first["b64"]}
    elif body.get("response_format") == "url":
        item = {"url": f"{base_url}/_mock/images/red.png"}
    else:
        item = {"b64_json": PNG_RGB_8}
    prompt = str(body.get("prompt") or "")
    data = [dict(item, revised_prompt=prompt) if prompt else dict(item) for _ in range(n)]
    words = max(1, len(prompt.split()))
    return {
        "created": created,
        "data": data,
        "background": "opaque",
        "output_format": "png",
        "quality": "low",
        "size": "1024x1024",
        "usage": {
            "input_tokens": words,
            "output_tokens": 16 * n,
            "total_tokens": words + 16 * n,
            "input_tokens_details": {"text_tokens": words, "image_tokens": 0},
        },
    }
