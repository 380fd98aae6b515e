"""Upstream protocol ``openai_image``: OpenAI's Images API (reference protocols.md 3.5).

Request direction (``encode_request`` + ``wire``):

- no user image -> JSON ``POST /v1/images/generations``;
- user images (base64 sources or ``data:image/...`` URLs; http URLs need ``image_resolve_urls``
  first and are otherwise skipped) -> multipart ``POST /v1/images/edits`` with one ``image[]``
  file per image; an image node with id ``__monoize_image_api_mask`` (or the internal mask
  marker) becomes the ``mask`` file.
- ``prompt`` = the user text nodes joined by a newline; whitelisted extras (size, quality, n,
  background, output_format...) pass through, typed image options of
  ``image_enable_openai_generation_tool`` too. The Images API never streams: ``SUPPORTS_STREAM``
  is False, so the proxy calls it whole and synthesises a stream for streaming clients.

Response direction: ``data[].b64_json`` / ``data[].url`` -> assistant image nodes (base64 with the
media type from ``output_format`` or the bytes' magic, or url), ``revised_prompt`` kept on the
node, ``usage`` -> Usage. So a Chat, Responses or Messages client that asks an image model gets
the images in its own protocol's shape.

``encode_request`` returns a JSON-able description (what captures show); ``wire(body)`` turns it
into (bytes, content type, path) for the upstream call.
"""

from __future__ import annotations

import base64
import binascii
import time
from typing import Any

import orjson

from gateway.errors import UpstreamProtocolError
from gateway.images import multipart
from gateway.images.compress import sniff
from gateway.images.sites import MASK_NODE_ID, data_image, is_mask
from gateway.urp import ImageNode, MediaSource, Node, Request, Response, TextNode, Usage
from gateway.urp import events as ev

from ..base import EncodeContext, new_id, token_count

PROTOCOL = "openai_image"
SUPPORTS_STREAM = False
GENERATIONS = "/v1/images/generations"
EDITS = "/v1/images/edits"
EDITS_KEY = "_gw_edits"  # marks an edits body; the files are under _gw_images / _gw_mask
IMAGE_OPTIONS = "_gw_image_generation"  # typed options set by image_enable_openai_generation_tool
PASSTHROUGH = (
    "n",
    "size",
    "quality",
    "background",
    "output_format",
    "output_compression",
    "moderation",
    "style",
    "response_format",
    "user",
    "input_fidelity",
    "partial_images",
)
_EXT = {"image/png": "png", "image/jpeg": "jpg", "image/webp": "webp", "image/gif": "gif"}

__all__ = [
    "PROTOCOL",
    "SUPPORTS_STREAM",
    "StreamDecoder",
    "decode_response",
    "encode_request",
    "upstream_headers",
    "upstream_path",
    "wire",
]


# -- request ----------------------------------------------------------------------------------------


def _file(node: ImageNode) -> dict[str, str] | None:
    src = node.source
    if src.kind == "base64" and src.data:
        mt, data = src.media_type or "image/png", src.data
    elif src.kind == "url" and isinstance(src.url, str) and (parsed := data_image(src.url)) is not None:
        mt, data = parsed
    else:
        return None
    return {"content_type": mt, "b64": data}


def encode_request(req: Request, ctx: EncodeContext) -> dict[str, Any]:
    prompt = "\n".join(n.content for n in req.input if type(n) is TextNode and n.role == "user" and n.content)
    body: dict[str, Any] = {"model": ctx.model, "prompt": prompt}
    options = req.extra.get(IMAGE_OPTIONS)
    for key in PASSTHROUGH:
        if key in req.extra:
            body[key] = req.extra[key]
        elif isinstance(options, dict) and key in options:
            body[key] = options[key]
    if req.user and "user" not in body:
        body["user"] = req.user
    images: list[dict[str, str]] = []
    mask: dict[str, str] | None = None
    for node in req.input:
        if type(node) is not ImageNode or node.role != "user":
            continue
        f = _file(node)
        if f is None:
            continue
        if node.id == MASK_NODE_ID or is_mask(node):
            mask = f
        else:
            images.append(f)
    if images:
        body[EDITS_KEY] = True
        body["_gw_images"] = images
        if mask is not None:
            body["_gw_mask"] = mask
    return body


def wire(body: dict[str, Any]) -> tuple[bytes, str, str]:
    """(bytes, content type, path) of the upstream request described by ``body``."""
    plain = {k: v for k, v in body.items() if not k.startswith("_gw_")}
    if not body.get(EDITS_KEY):
        return orjson.dumps(plain), "application/json", GENERATIONS
    fields = [
        (k, v if isinstance(v, str) else orjson.dumps(v).decode().strip('"'))
        for k, v in plain.items()
        if v is not None
    ]
    files = []
    images = body.get("_gw_images") or []
    name = "image[]" if len(images) > 1 else "image"
    for i, f in enumerate(images):
        mt = f["content_type"]
        files.append((name, f"image-{i + 1}.{_EXT.get(mt, 'png')}", mt, base64.b64decode(f["b64"])))
    mask = body.get("_gw_mask")
    if mask:
        files.append(
            (
                "mask",
                f"mask.{_EXT.get(mask['content_type'], 'png')}",
                mask["content_type"],
                base64.b64decode(mask["b64"]),
            )
        )
    data, ctype = multipart.encode(fields, files)
    return data, ctype, EDITS


def upstream_path(model: str, stream: bool) -> str:
    return GENERATIONS  # the edits path comes from wire(), which sees the body


def upstream_headers(api_key: str) -> dict[str, str]:
    return {"authorization": f"Bearer {api_key}"}


# -- response ---------------------------------------------------------------------------------------


def _media_type(b64: str, output_format: Any) -> str:
    if isinstance(output_format, str) and output_format:
        return "image/jpeg" if output_format in ("jpg", "jpeg") else f"image/{output_format}"
    try:
        head = base64.b64decode(b64[:32] + "=" * (-len(b64[:32]) % 4))
    except (binascii.Error, ValueError):
        head = b""
    return sniff(head) or "image/png"


def decode_response(body: dict[str, Any]) -> Response:
    if not isinstance(body, dict):
        raise UpstreamProtocolError("images response must be a JSON object")
    if isinstance(body.get("error"), dict):
        err = body["error"]
        raise UpstreamProtocolError(
            str(err.get("message") or "upstream error"),
            code=str(err.get("code") or "upstream_error"),
            error_type=err.get("type") if isinstance(err.get("type"), str) else None,
        )
    data = body.get("data")
    if not isinstance(data, list):
        raise UpstreamProtocolError("images response has no 'data' array")
    output: list[Node] = []
    for item in data:
        if not isinstance(item, dict):
            continue
        extra = (
            {"revised_prompt": item["revised_prompt"]} if isinstance(item.get("revised_prompt"), str) else {}
        )
        if isinstance(item.get("b64_json"), str) and item["b64_json"]:
            src = MediaSource(
                kind="base64",
                data=item["b64_json"],
                media_type=_media_type(item["b64_json"], body.get("output_format")),
            )
        elif isinstance(item.get("url"), str) and item["url"]:
            src = MediaSource(kind="url", url=item["url"])
        else:
            continue
        output.append(ImageNode(role="assistant", source=src, extra=extra))
    usage = None
    raw = body.get("usage")
    if isinstance(raw, dict):
        usage = Usage(
            input_tokens=token_count(raw.get("input_tokens")) or 0,
            output_tokens=token_count(raw.get("output_tokens")) or 0,
        )
    created = body.get("created") if isinstance(body.get("created"), int) else int(time.time())
    return Response(
        id=new_id("img_"), model="", output=output, finish_reason="stop", usage=usage, created=created
    )


class StreamDecoder:
    """The Images API is never called streaming (``SUPPORTS_STREAM``); reaching this is a bug, so
    it reports a stream error rather than guessing."""

    finished = False

    def feed(self, event_name: str | None, data: str) -> list[ev.Event]:
        self.finished = True
        return [
            ev.StreamError(
                message="openai_image upstreams are not streamed", code="invalid_upstream_response"
            )
        ]

    def close(self) -> list[ev.Event]:
        return [] if self.finished else self.feed(None, "")
