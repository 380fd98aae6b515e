"""Images in captures: large base64 images are replaced by a short placeholder, and the dump keeps a
small thumbnail of each distinct image for the viewer (a person would rather look at an image
than read 2 MB of base64).

Recognised: ``data:image/...;base64,`` URLs, and bare base64 strings of at least
``PLACEHOLDER_MIN`` characters whose decoded bytes start with an image signature (PNG, JPEG,
WebP, GIF), wherever they sit (request and response bodies, URP dumps, SSE frames). Other long
base64 (encrypted reasoning, files) is left to the ordinary capture bounds. The placeholder names
the media type, the length and a SHA-256 prefix that matches the thumbnail's ``sha256``:
``<image image/png, 1398100 base64 chars, sha256:0a1b2c3d4e5f6a7b>``.

Runs on the capture writer thread (``captures.sink``), never on the request path.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
import re
import warnings
from typing import Any

PLACEHOLDER_MIN = 1024  # base64 characters; smaller images stay inline
MAX_THUMBNAILS = 8
THUMB_EDGE = 96
MAX_THUMB_SOURCE_BYTES = 20 * 1024 * 1024
MAX_THUMB_PIXELS = 40_000_000

_MAGIC = ((b"\x89PNG", "image/png"), (b"\xff\xd8\xff", "image/jpeg"), (b"GIF8", "image/gif"))
_RUN = re.compile(
    r"(data:(image/[A-Za-z0-9.+-]+);base64,)?([A-Za-z0-9+/]{" + str(PLACEHOLDER_MIN) + r",}={0,2})"
)


_B64_CHARS = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
# Every base64 character -> "A", every other byte -> "."; a long run is then a plain substring.
_B64_MAP = bytes(65 if b in _B64_CHARS else 46 for b in range(256))
_B64_RUN = b"A" * PLACEHOLDER_MIN


def may_hold_image(data: bytes) -> bool:
    """Whether ``data`` (compact JSON as orjson writes it: base64 characters and ``data:image/``
    appear in it as they are) may hold what :meth:`ImageBounder.bound` replaces or notes; False
    means the walk can be skipped. A run of ``PLACEHOLDER_MIN`` base64 characters is found with
    ``translate`` and a substring search: the regex ``[A-Za-z0-9+/]{1024,}`` rescanned every
    shorter run from each of its positions and was the writer's dearest screen (issue 20)."""
    if data.find(b"data:image/") >= 0:
        return True
    return len(data) >= PLACEHOLDER_MIN and data.translate(_B64_MAP).find(_B64_RUN) >= 0


def _sniff(b64: str) -> str | None:
    try:
        head = base64.b64decode(b64[:24])
    except (binascii.Error, ValueError):
        return None
    for magic, mt in _MAGIC:
        if head.startswith(magic):
            return mt
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    return None


class ImageBounder:
    """Collects the images of one capture while replacing the large ones by placeholders."""

    def __init__(self) -> None:
        self.images: dict[str, tuple[str, str]] = {}  # sha prefix -> (media type, base64)

    def _note(self, media_type: str, data: str) -> str:
        sha = hashlib.sha256(data.encode("ascii", "replace")).hexdigest()[:16]
        if sha not in self.images and len(self.images) < MAX_THUMBNAILS:
            self.images[sha] = (media_type, data)
        return sha

    def _placeholder(self, media_type: str, data: str) -> str:
        sha = self._note(media_type, data)
        return f"<image {media_type}, {len(data)} base64 chars, sha256:{sha}>"

    def bound_str(self, text: str) -> str:
        if len(text) < PLACEHOLDER_MIN:
            if text.startswith("data:image/") and ";base64," in text:
                mt, _, data = text[5:].partition(";base64,")
                if data:
                    self._note(mt, data)
            return text
        return _RUN.sub(self._replace, text)

    def _replace(self, m: re.Match) -> str:
        prefix, declared, data = m.group(1), m.group(2), m.group(3)
        media_type = declared or _sniff(data)
        if media_type is None:
            return m.group(0)
        return (prefix or "") + self._placeholder(media_type, data)

    def bound(self, value: Any) -> Any:
        """A copy of a JSON-able value with large images replaced (the input is not mutated)."""
        if isinstance(value, str):
            return self.bound_str(value)
        if isinstance(value, dict):
            return {k: self.bound(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.bound(v) for v in value]
        return value

    def thumbnails(self) -> list[dict[str, Any]]:
        """One entry per distinct image: sha256 prefix, media type, size, and a small WebP data URL
        (or ``error`` when it cannot be decoded safely)."""
        return [_thumbnail(sha, mt, data) for sha, (mt, data) in self.images.items()]


def _thumbnail(sha: str, media_type: str, data: str) -> dict[str, Any]:
    entry: dict[str, Any] = {"sha256": sha, "media_type": media_type, "base64_chars": len(data)}
    if len(data) > 4 * MAX_THUMB_SOURCE_BYTES // 3:
        entry["error"] = "too large to preview"
        return entry
    try:
        from PIL import Image

        raw = base64.b64decode(data)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            img: Image.Image = Image.open(io.BytesIO(raw))
            entry["width"], entry["height"] = img.size
            if img.size[0] * img.size[1] > MAX_THUMB_PIXELS:
                entry["error"] = "too many pixels to preview"
                return entry
            img.draft("RGB", (THUMB_EDGE * 2, THUMB_EDGE * 2))  # JPEG: decode at a reduced scale
            img.thumbnail((THUMB_EDGE, THUMB_EDGE))
            if img.mode not in ("RGB", "RGBA"):
                img = img.convert("RGBA")
            out = io.BytesIO()
            img.save(out, "WEBP", quality=60)
        entry["thumbnail"] = "data:image/webp;base64," + base64.b64encode(out.getvalue()).decode()
    except Exception as exc:  # a corrupt image must never drop the capture
        entry["error"] = f"cannot preview: {type(exc).__name__}"
    return entry
