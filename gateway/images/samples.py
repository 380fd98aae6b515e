"""Tiny sample images for worked examples, the mock upstream and tests (base64 PNG)."""

# 8x8 opaque red, RGB (no alpha channel).
PNG_RGB_8 = (
    "iVBORw0KGgoAAAANSUhEUgAAAAgAAAAICAIAAABLbSncAAAAFElEQVR4nGM8ISfHgA0wYRUdtBIA0MoBFD5jqJkAAAAASUVORK5CYII="
)
# 1x1 half-transparent red, RGBA.
PNG_RGBA_1 = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGM4ISfXAAAEOwGFUg8H1wAAAABJRU5ErkJggg=="
)
