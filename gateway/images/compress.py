"""The shared image compression pipeline of ``image_compress_input`` and ``image_compress_output``
(reference transforms.md 3.3, "Shared: image compression pipeline").

``compress_source(media_type, b64, cfg)`` is pure and synchronous (call it on the image pool,
``gateway.images.pool``): decode the base64, check the declared type and the size guards, sniff
the real format, read the dimensions (refusing decompression bombs before decoding pixels),
decode, apply the EXIF orientation, fit ``max_edge_px``, re-encode in ``output_format``, and keep
the original bytes when the result is not smaller and ``skip_if_smaller`` is on. It answers with
an ``Outcome``: a replacement (media type + base64), or None with a note saying why the image was
left as it was. Corrupt images, bombs and unsupported types are notes, never exceptions; only a
configuration the build cannot serve (JPEG XL) raises ``TransformFailed``, as the reference asks.

Differences from the reference, on purpose: the result cache is in memory (a bounded LRU keyed
by the reference's SHA-256 key) rather than a directory of files; JPEG is written by Pillow's
libjpeg (no mozjpeg), PNG with Pillow's maximum zlib level and optimiser (no oxipng pass).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
import struct
import threading
import warnings
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from gateway.errors import TransformFailed

OUTPUT_FORMATS = ("original", "jpg", "jpegxl_lossless", "jpegxl", "webp_lossless", "webp", "png")
ACCEPTED_TYPES = frozenset({"image/jpeg", "image/jpg", "image/png", "image/webp"})
CACHE_VERSION = b"compress_user_message_images:v7"


def _knob(name: str) -> int:
    from gateway.conf import gateway_settings

    return int(getattr(gateway_settings, name))


# Limits from the gateway's knobs (gateway.settings.GATEWAY_KNOBS: GATEWAY_IMAGE_* variables).
MAX_ENCODED_BYTES = _knob("IMAGE_MAX_ENCODED_BYTES")
MAX_PIXELS = _knob("IMAGE_MAX_PIXELS")
CACHE_MAX_BYTES = _knob("IMAGE_CACHE_MAX_BYTES")
CACHE_MAX_ENTRY_BYTES = _knob("IMAGE_CACHE_MAX_ENTRY_BYTES")

# The shared config schema (both transforms). Unknown keys are ignored, as the reference's parser.
CONFIG_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "max_edge_px": {
            "type": "integer",
            "minimum": 1,
            "description": "Resize so the longer edge is at most this many pixels (absent: keep size).",
        },
        "jpeg_quality": {"type": "integer", "minimum": 1, "maximum": 100, "default": 80},
        "jpegxl_quality": {"type": "integer", "minimum": 1, "maximum": 99, "default": 90},
        "jpegxl_effort": {"type": "integer", "minimum": 1, "maximum": 10, "default": 7},
        "webp_quality": {"type": "integer", "minimum": 1, "maximum": 100, "default": 80},
        "skip_if_smaller": {
            "type": "boolean",
            "default": True,
            "description": "Keep the original when the re-encoded image is not smaller.",
        },
        "output_format": {"type": "string", "enum": list(OUTPUT_FORMATS), "default": "original"},
    },
}


def check_config(config: dict[str, Any]) -> list[tuple[str, str]]:
    """Refuse at save time what this build cannot do at run time (the reference fails the
    request instead; an operator would rather know when saving the rule)."""
    if config.get("output_format") in ("jpegxl", "jpegxl_lossless"):
        return [("output_format", "jpeg xl support is disabled in this build")]
    return []


@dataclass(frozen=True, slots=True)
class CompressConfig:
    max_edge_px: int | None = None
    jpeg_quality: int = 80
    jpegxl_quality: int = 90
    jpegxl_effort: int = 7
    webp_quality: int = 80
    skip_if_smaller: bool = True
    output_format: str = "original"

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> CompressConfig:
        return cls(
            max_edge_px=config.get("max_edge_px"),
            jpeg_quality=config.get("jpeg_quality", 80),
            jpegxl_quality=config.get("jpegxl_quality", 90),
            jpegxl_effort=config.get("jpegxl_effort", 7),
            webp_quality=config.get("webp_quality", 80),
            skip_if_smaller=config.get("skip_if_smaller", True),
            output_format=config.get("output_format", "original"),
        )


@dataclass(frozen=True, slots=True)
class Outcome:
    """``media_type``/``data`` set: replace the source with them. Both None: leave it. ``note``
    says what happened (shown in captures)."""

    media_type: str | None = None
    data: str | None = None
    note: str | None = None

    @property
    def changed(self) -> bool:
        return self.data is not None


def sniff(data: bytes) -> str | None:
    """The real image type from magic bytes (JPEG, PNG, WebP), else None."""
    if data[:3] == b"\xff\xd8\xff":
        return "image/jpeg"
    if data[:8] == b"\x89PNG\r\n\x1a\n":
        return "image/png"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def cache_key(source_type: str, cfg: CompressConfig, raw: bytes) -> str:
    h = hashlib.sha256()
    h.update(CACHE_VERSION + b"\0" + source_type.encode() + b"\0")
    h.update(struct.pack("<I", cfg.max_edge_px or 0))
    h.update(
        bytes(
            [
                cfg.jpeg_quality,
                cfg.jpegxl_quality,
                cfg.jpegxl_effort,
                cfg.webp_quality,
                1 if cfg.skip_if_smaller else 0,
            ]
        )
    )
    h.update(cfg.output_format.encode() + b"\0")
    h.update(raw)
    return h.hexdigest()


class _Cache:
    """Bounded in-memory LRU of results (key -> (media type, base64)), shared by threads."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.size = 0
        self.items: OrderedDict[str, tuple[str, str]] = OrderedDict()
        self.lock = threading.Lock()

    def get(self, key: str) -> tuple[str, str] | None:
        with self.lock:
            hit = self.items.get(key)
            if hit is not None:
                self.items.move_to_end(key)
            return hit

    def put(self, key: str, value: tuple[str, str]) -> None:
        cost = len(value[1])
        if cost > CACHE_MAX_ENTRY_BYTES:
            return
        with self.lock:
            if key in self.items:
                return
            self.items[key] = value
            self.size += cost
            while self.size > self.max_bytes and self.items:
                _, old = self.items.popitem(last=False)
                self.size -= len(old[1])

    def clear(self) -> None:
        with self.lock:
            self.items.clear()
            self.size = 0


CACHE = _Cache(CACHE_MAX_BYTES)

_ORIGINAL = {"image/jpeg": "jpg", "image/png": "png", "image/webp": "webp_lossless"}


def compress_source(media_type: str | None, b64: str, cfg: CompressConfig, start: int = 0) -> Outcome:
    """One eligible source through the pipeline (reference steps 2-9). Synchronous, CPU-bound.
    ``b64[start:]`` is the base64 (a data URL's payload is sliced here, on the pool)."""
    if start:
        b64 = b64[start:]
    declared = (media_type or "").strip().lower()
    if declared not in ACCEPTED_TYPES:
        return Outcome(note=f"left: type {declared or 'unknown'} is not compressed")
    if len(b64) > 4 * -(-MAX_ENCODED_BYTES // 3):
        return Outcome(note="left: base64 larger than the decode limit")
    try:
        raw = base64.b64decode(b64, validate=True)
    except (binascii.Error, ValueError):
        return Outcome(note="left: invalid base64")
    if len(raw) > MAX_ENCODED_BYTES:
        return Outcome(note="left: image larger than the decode limit")
    if declared == "image/jpg":
        declared = "image/jpeg"
    source_type = sniff(raw) or declared
    key = cache_key(source_type, cfg, raw)
    hit = CACHE.get(key)
    if hit is not None:
        return Outcome(media_type=hit[0], data=hit[1], note="compressed (cached)")
    encoded = _reencode(raw, source_type, cfg)
    if isinstance(encoded, str):  # a note: left unchanged
        return Outcome(note=encoded)
    new_type, new_bytes = encoded
    if cfg.skip_if_smaller and len(new_bytes) >= len(raw):
        if source_type != declared:
            return Outcome(
                media_type=source_type, data=b64, note=f"kept original bytes, type corrected to {source_type}"
            )
        return Outcome(note="left: re-encoded image was not smaller")
    data = base64.b64encode(new_bytes).decode("ascii")
    CACHE.put(key, (new_type, data))
    return Outcome(media_type=new_type, data=data, note=f"compressed {len(raw)} -> {len(new_bytes)} bytes")


def _has_alpha(img) -> bool:
    return img.mode in ("RGBA", "LA", "PA", "RGBa", "La") or (img.mode == "P" and "transparency" in img.info)


def _reencode(raw: bytes, source_type: str, cfg: CompressConfig) -> tuple[str, bytes] | str:
    """(new media type, bytes), or a note (str) when the image stays as it was."""
    from PIL import Image, ImageOps, UnidentifiedImageError

    fmt = cfg.output_format
    if fmt == "original":
        fmt = _ORIGINAL.get(source_type, "png")
    if fmt in ("jpegxl", "jpegxl_lossless"):
        raise TransformFailed("jpeg xl support is disabled in this build")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", Image.DecompressionBombWarning)
        try:
            img: Image.Image = Image.open(io.BytesIO(raw))
            width, height = img.size
        except Image.DecompressionBombError:
            return "left: image dimensions exceed Pillow's decompression bomb limit"
        except (UnidentifiedImageError, OSError, ValueError, SyntaxError):
            return "left: unreadable image header (corrupt or unsupported)"
        if width * height > MAX_PIXELS:
            return f"left: {width}x{height} exceeds the {MAX_PIXELS}-pixel decode limit (decompression bomb guard)"
        try:
            img.load()
            img = ImageOps.exif_transpose(img) or img
        except (OSError, ValueError, Image.DecompressionBombError, SyntaxError, struct.error):
            return "left: the image could not be decoded (corrupt)"
    if fmt == "jpg" and _has_alpha(img):
        return "left: image has an alpha channel and the output is JPEG"
    if cfg.max_edge_px and max(img.size) > cfg.max_edge_px:
        w, h = img.size
        scale = cfg.max_edge_px / max(w, h)
        img = img.resize((max(1, round(w * scale)), max(1, round(h * scale))), Image.Resampling.LANCZOS)
    if fmt != "jpg" and img.mode not in ("RGB", "RGBA", "L", "LA", "P"):
        img = img.convert("RGBA" if _has_alpha(img) else "RGB")  # CMYK, I;16...: what PNG/WebP can hold
    out = io.BytesIO()
    try:
        if fmt == "jpg":
            img.convert("RGB").save(out, "JPEG", quality=cfg.jpeg_quality)
            return "image/jpeg", out.getvalue()
        if fmt == "png":
            img.save(out, "PNG", optimize=True, compress_level=9)
            return "image/png", out.getvalue()
        if fmt == "webp_lossless":
            img.save(out, "WEBP", lossless=True)
            return "image/webp", out.getvalue()
        if fmt == "webp":
            img.save(out, "WEBP", quality=cfg.webp_quality, method=0)
            return "image/webp", out.getvalue()
    except (OSError, ValueError) as exc:
        raise TransformFailed(f"image encoder failed: {exc}") from exc
    raise TransformFailed(f"unknown output_format {fmt!r}")
