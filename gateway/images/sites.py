"""Where compressible images sit in requests and responses, as a list of ``Site`` objects the
compression transforms process (inline for the sync path, on the image pool for the async one)
and then write back.

A site is one eligible source: an image node's ``base64`` source, an image node's
``data:image/...;base64,`` URL source, or such a value inside a function tool call's JSON
arguments (a string starting ``data:image/``, or an object of type image/input_image/
output_image/image_url with a ``{"type": "base64", "media_type", "data"}`` source). Writing back
preserves the representation: base64 stays base64, a data URL stays a data URL (with its
``detail``), tool-call arguments are re-serialised only when something in them changed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson

from gateway.protocols.base import split_data_url
from gateway.urp import ImageNode, Node, ToolCallNode, ToolResultNode

from . import pool
from .compress import CompressConfig, Outcome, compress_source

MASK_NODE_ID = "__monoize_image_api_mask"
MASK_EXTRA = "_gw_image_mask"
_IMAGE_OBJECT_TYPES = frozenset({"image", "input_image", "output_image", "image_url"})


@dataclass(slots=True)
class Site:
    """``data[start:]`` is the base64 payload. A data URL's site holds the whole URL with
    ``start`` past its comma: slicing a 5 MB payload out on the event loop cost ~3 ms (a fresh
    allocation, page faults included); the image pool slices it instead (issue 16)."""

    media_type: str
    data: str
    write: Callable[[str, str], None]  # (new media type, new base64)
    outcome: Outcome | None = None
    start: int = 0


@dataclass(slots=True)
class Sites:
    items: list[Site] = field(default_factory=list)
    finalizers: list[Callable[[], None]] = field(default_factory=list)

    def finish(self) -> list[str]:
        """Write every changed outcome back; the notes of all outcomes."""
        notes = []
        for site in self.items:
            out = site.outcome
            if out is None:
                continue
            if out.note:
                notes.append(out.note)
            if out.data is not None:  # changed
                site.write(out.media_type or site.media_type, out.data)
        for fin in self.finalizers:
            fin()
        return notes


def is_mask(node: Node) -> bool:
    return (
        node.id == MASK_NODE_ID
        or bool(node.extra.get(MASK_EXTRA))
        or bool(
            isinstance(node.extra.get("metadata"), dict) and node.extra["metadata"].get("image_mask") is True
        )
    )


def image_site(node: ImageNode) -> Site | None:
    """The site of an image node, when its source is eligible."""
    src = node.source
    if src.kind == "base64" and isinstance(src.data, str) and src.data:

        def write_b64(mt: str, data: str, src=src) -> None:
            src.media_type = mt
            src.data = data
            _sync_raw_item(node, mt, data)

        return Site(src.media_type or "", src.data, write_b64)
    if src.kind == "url" and isinstance(src.url, str):
        parsed = data_image_start(src.url)
        if parsed is not None:

            def write_url(mt: str, data: str, src=src) -> None:
                src.url = f"data:{mt};base64,{data}"

            return Site(parsed[0], src.url, write_url, start=parsed[1])
    return None


RAW_ITEM = "_gw_rsp_body"  # the Responses codec's raw image_generation_call item, replayed same-protocol


def _sync_raw_item(node: ImageNode, media_type: str, data: str) -> None:
    """A Responses client gets the upstream's raw ``image_generation_call`` item back; keep its
    ``result`` and ``output_format`` in step with the rewritten source."""
    raw = node.extra.get(RAW_ITEM)
    if isinstance(raw, dict) and "result" in raw:
        raw = dict(raw)
        raw["result"] = data
        sub = media_type.partition("/")[2]
        if sub:
            raw["output_format"] = "jpeg" if sub == "jpg" else sub
        node.extra[RAW_ITEM] = raw


def data_image(url: str) -> tuple[str, str] | None:
    """``data:image/<x>;base64,<payload>`` with a non-empty payload -> (media type, payload)."""
    parts = split_data_url(url)
    if parts is None or not parts[0].lower().startswith("image/") or not parts[1]:
        return None
    return parts


def data_image_start(url: str) -> tuple[str, int] | None:
    """``data_image`` without copying the payload: (media type, index where the payload starts)."""
    if not url.startswith("data:"):
        return None
    comma = url.find(",", 5)
    if comma < 0 or comma == len(url) - 1 or not url.endswith(";base64", 5, comma):
        return None
    media_type = url[5 : comma - 7]
    return (media_type, comma + 1) if media_type.lower().startswith("image/") else None


def argument_sites(call: ToolCallNode, sites: Sites) -> None:
    """Sites inside a function call's JSON arguments (custom tool input is never touched)."""
    args = call.arguments
    if call.tool_type != "function" or not args or ("data:image/" not in args and "base64" not in args):
        return
    try:
        value = orjson.loads(args)
    except orjson.JSONDecodeError:
        return
    found: list[Site] = []

    def walk(holder: Any, key: Any) -> None:
        item = holder[key]
        if isinstance(item, str):
            parsed = data_image(item) if item.startswith("data:image/") else None
            if parsed is not None:

                def write(mt: str, data: str, holder=holder, key=key) -> None:
                    holder[key] = f"data:{mt};base64,{data}"

                found.append(Site(parsed[0], parsed[1], write))
        elif isinstance(item, dict):
            source = item.get("source")
            if (
                item.get("type") in _IMAGE_OBJECT_TYPES
                and isinstance(source, dict)
                and source.get("type") == "base64"
                and isinstance(source.get("media_type"), str)
                and isinstance(source.get("data"), str)
            ):

                def write_src(mt: str, data: str, source=source) -> None:
                    source["media_type"] = mt
                    source["data"] = data

                found.append(Site(source["media_type"], source["data"], write_src))
            else:
                for k in list(item):
                    walk(item, k)
        elif isinstance(item, list):
            for i in range(len(item)):
                walk(item, i)

    root = [value]
    walk(root, 0)
    if not found:
        return

    def finalize() -> None:
        if any(s.outcome is not None and s.outcome.changed for s in found):
            call.arguments = orjson.dumps(root[0]).decode()

    sites.items.extend(found)
    sites.finalizers.append(finalize)


def collect(nodes: Iterable[Node], role: str, *, skip_masks: bool) -> Sites:
    """Sites in ``nodes``: image nodes with ``role``, image entries of every tool result (mask
    entries skipped when ``skip_masks``), and function tool-call arguments."""
    sites = Sites()
    for node in nodes:
        if type(node) is ImageNode:
            if node.role == role:
                site = image_site(node)
                if site is not None:
                    sites.items.append(site)
        elif type(node) is ToolResultNode:
            for entry in node.content:
                if type(entry) is ImageNode and not (skip_masks and is_mask(entry)):
                    site = image_site(entry)
                    if site is not None:
                        sites.items.append(site)
        elif type(node) is ToolCallNode:
            argument_sites(node, sites)
    return sites


def note(ctx: Any, type_id: str, notes: list[str]) -> None:
    """Record what a rule did to images for the capture (``ctx.shared["notes"]``)."""
    if notes:
        ctx.shared.setdefault("notes", []).extend(f"{type_id}: {n}" for n in notes)


def process_inline(sites: Sites, cfg: CompressConfig) -> list[str]:
    for site in sites.items:
        site.outcome = compress_source(site.media_type, site.data, cfg, site.start)
    return sites.finish()


async def process_on_pool(sites: Sites, cfg: CompressConfig) -> list[str]:
    """Every site compressed on the image pool (concurrently, bounded by the pool's size)."""
    import asyncio

    if not sites.items:
        return []
    outcomes = await asyncio.gather(
        *(pool.run(compress_source, s.media_type, s.data, cfg, s.start) for s in sites.items),
        return_exceptions=True,
    )
    for site, out in zip(sites.items, outcomes, strict=True):
        if isinstance(out, pool.PoolBroken):  # a crashed worker: this image stays, the request goes on
            out = Outcome(note=f"left: {out}")
        elif isinstance(out, BaseException):
            raise out
        site.outcome = out
    return sites.finish()
