"""A capture record -> the bounded, masked, compact JSON dump that is stored.

Every part is serialized once with orjson and the object is assembled from those bytes, so the
size checks run on exactly the bytes that are written and nothing is re-encoded (reference
§3.3). Over the per-capture byte budget:

- oversized top-level payloads (client request, client response, client frames) are replaced by
  a marker ``{"truncated": true, "reason": "capture_bytes", "original_bytes": N}``, biggest first;
- an attempt that does not fit is replaced by a placeholder (identity fields, a bounded error,
  payloads null, ``executed_chain: null``, ``truncated: {reason: "attempt_bytes", ...}``); when
  not even the placeholder fits the attempt is dropped and counted. The reference drops trailing
  attempts outright; keeping placeholders tells an auditor which routes were tried, which is what
  a user reading a failover capture wants.

``capture_truncation`` carries the counters: omitted attempts, frames and bytes, frames cut at
the per-frame limit, and the retained bytes.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson

from captures.bounds import Budget, cut_utf8
from captures.images import ImageBounder, may_hold_image
from captures.materialize import Encoded, materialize
from captures.record import AttemptRecord, CaptureRecord
from captures.redact import mask_secrets, may_hold_secret

SCHEMA_VERSION = 1
MAX_ID_BYTES = 256
CHAIN_KEYS = ("scope", "transform", "phase", "rule_id")
_RESERVE = 512  # room for capture_truncation and the closing brackets


@dataclass(slots=True)
class DumpMeta:
    """What the Capture row stores next to the blob (the list never opens blobs)."""

    request_id: str
    client_request_id: str
    created_at: float
    api_key_id: int | None
    api_key_name: str
    client_protocol: str
    stream: bool
    logical_model: str
    status: int
    is_error: bool
    attempt_count: int
    raw_bytes: int
    truncated: bool

    def as_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}


def _ident(text: Any) -> str:
    return cut_utf8(str(text or ""), MAX_ID_BYTES)


def _chain(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Only scope, transform, phase and rule id: a rule's config may hold secrets."""
    return [{k: e.get(k) for k in CHAIN_KEYS} for e in entries]


def _identity(n: int, a: AttemptRecord) -> dict[str, Any]:
    return {
        "attempt_number": n,
        "provider": _ident(a.provider),
        "channel": _ident(a.channel),
        "upstream_protocol": a.upstream_protocol,
        "logical_model": _ident(a.logical_model),
        "upstream_model": _ident(a.upstream_model),
        "started_at": a.started_at,
        "ttfb_ms": a.ttfb_ms,
        "duration_ms": a.duration_ms,
        "upstream_status": a.upstream_status,
        "error": cut_utf8(a.error, 4096) if a.error else None,
        "error_detail": cut_utf8(a.error_detail, 4096) if a.error_detail else None,
        "affinity": a.affinity,
    }


def _plain(value: Any) -> bytes:
    """A payload's compact JSON as it is (``Encoded`` bytes are that already)."""
    return value if isinstance(value, Encoded) else orjson.dumps(value)


def _encode(value: Any, img: ImageBounder, screen: bool = True) -> bytes:
    """One payload as compact JSON, secret-looking fields masked and large images replaced. The
    two walks run only when the bytes say they might change something (``may_hold_secret``,
    ``may_hold_image``): most bodies have neither, and the walks were most of the writer's time.
    ``screen=False``: the caller screened every payload of the capture at once and found nothing."""
    data = _plain(value)
    if screen and (may_hold_secret(data) or may_hold_image(data)):
        if isinstance(value, Encoded):
            value = orjson.loads(bytes(value))  # orjson takes no bytes subclass
        data = orjson.dumps(img.bound(mask_secrets(value)))
    return data


def _enc(value: Any) -> Encoded:
    return value if isinstance(value, Encoded) else Encoded(orjson.dumps(value))


def _needs_screen(record: CaptureRecord) -> bool:
    """Encode every body payload of the capture (in place, as ``Encoded``) and say whether any
    may hold a secret-looking key or an image: one screen over them all (most captures have
    neither) instead of one per payload; only a capture that has one pays a per-payload walk."""
    record.client_request = _enc(record.client_request)
    record.client_response = _enc(record.client_response)
    parts = [record.client_request, record.client_response]
    for a in record.attempts:
        a.internal_request = _enc(a.internal_request)
        a.upstream_request = _enc(a.upstream_request)
        a.upstream_response = _enc(a.upstream_response)
        a.response_after_chains = _enc(a.response_after_chains)
        a.rule_steps = _enc(a.rule_steps)
        parts += (
            a.internal_request,
            a.upstream_request,
            a.upstream_response,
            a.response_after_chains,
            a.rule_steps,
        )
    data = b"".join(parts)
    return may_hold_secret(data) or may_hold_image(data)


def _attempt(n: int, a: AttemptRecord, img: ImageBounder, screen: bool = True) -> bytes:
    head = orjson.dumps(_identity(n, a))
    chain = a.executed_chain
    parts = [
        ("executed_chain", chain if isinstance(chain, Encoded) else orjson.dumps(_chain(chain))),
        ("internal_request", _encode(a.internal_request, img, screen)),
        ("upstream_request", _encode(a.upstream_request, img, screen)),
        ("upstream_response", _encode(a.upstream_response, img, screen)),
        ("upstream_frames", orjson.dumps([img.bound_str(f) for f in a.upstream_frames])),
        ("response_after_chains", _encode(a.response_after_chains, img, screen)),
        ("rule_steps", _encode(a.rule_steps, img, screen)),
    ]
    if a.notes:
        parts.append(("notes", orjson.dumps([cut_utf8(str(note), 1024) for note in a.notes[:64]])))
    return head[:-1] + b"," + _obj(parts)[1:]


def _placeholder(n: int, a: AttemptRecord, original: int) -> bytes:
    out = _identity(n, a)
    out.update(
        {
            "executed_chain": None,
            "internal_request": None,
            "upstream_request": None,
            "upstream_response": None,
            "upstream_frames": None,
            "response_after_chains": None,
            "rule_steps": None,
            "truncated": {"truncated": True, "reason": "attempt_bytes", "original_bytes": original},
        }
    )
    return orjson.dumps(out)


def _marker(original: int) -> bytes:
    return orjson.dumps({"truncated": True, "reason": "capture_bytes", "original_bytes": original})


_KEYS: dict[str, bytes] = {}  # key -> b',"key":' (a few dozen fixed names)


def _obj(parts: list[tuple[str, bytes]]) -> bytes:
    """The JSON object of already encoded values, copied once (one join)."""
    out = []
    for k, v in parts:
        prefix = _KEYS.get(k)
        if prefix is None:
            prefix = _KEYS[k] = b',"' + k.encode() + b'":'
        out.append(prefix)
        out.append(v)
    if not out:
        return b"{}"
    out[0] = out[0][1:]
    return b"{" + b"".join(out) + b"}"


def mask_known(data: bytes, secrets: set[str] | tuple[str, ...]) -> bytes:
    """``data`` (JSON) with every known secret replaced by ``***`` as it appears inside a JSON
    string (escaped), longest first so a URL goes before its host."""
    for secret in sorted(secrets, key=len, reverse=True):
        if len(secret) < 4:
            continue
        needle = orjson.dumps(secret)[1:-1]
        if data.find(needle) >= 0:
            data = data.replace(needle, b"***")
    return data


def is_error(record: CaptureRecord) -> bool:
    status = record.client_status or 0
    return status == 0 or status >= 400 or record.error is not None


def build(record: CaptureRecord) -> tuple[bytes, DumpMeta]:
    """The dump's JSON bytes (within the byte budget) and the row metadata."""
    materialize(record, encoded=True)
    budget = record.budget or Budget()
    limit = budget.limits.max_bytes
    head = _head(record)
    img = ImageBounder()  # large base64 images -> placeholders, thumbnails kept for the viewer
    screen = _needs_screen(record)
    payloads: list[list[Any]] = [
        ["client_request", _encode(record.client_request, img, screen)],
        ["client_response", _encode(record.client_response, img, screen)],
        ["client_frames", orjson.dumps([img.bound_str(f) for f in record.client_frames])],
    ]
    omitted_bytes = budget.omitted_bytes
    used = len(head) + 1 + _RESERVE + 16  # the members and their comma
    # Biggest payload first until the top level leaves room for attempt placeholders.
    room = max(limit - used - 1024 * min(len(record.attempts), 4), limit // 4)
    for entry in sorted(payloads, key=lambda p: len(p[1]), reverse=True):
        total = sum(len(p[1]) for p in payloads)
        if total <= room:
            break
        original = len(entry[1])
        entry[1] = _marker(original)
        omitted_bytes += original
    used += sum(len(k) + len(v) + 4 for k, v in payloads)
    kept: list[bytes] = []
    omitted_attempts = budget.omitted_attempts
    for n, a in enumerate(record.attempts, start=1):
        data = _attempt(n, a, img, screen)
        if used + len(data) + 1 > limit:
            omitted_bytes += len(data)
            data = _placeholder(n, a, len(data))
            if used + len(data) + 1 > limit:
                omitted_attempts += 1
                continue
        kept.append(data)
        used += len(data) + 1
    attempts_bytes = b"[" + b",".join(kept) + b"]"

    truncated = bool(omitted_attempts or budget.omitted_frames or omitted_bytes or budget.cut_frames)
    body_parts: list[tuple[str, bytes]] = [*((k, v) for k, v in payloads), ("attempts", attempts_bytes)]
    if img.images:
        thumbs = orjson.dumps(img.thumbnails())
        if used + len(thumbs) + 16 <= limit:  # thumbnails are a few KB; never at the expense of data
            body_parts.append(("image_thumbnails", thumbs))
    retained = len(head) + 1 + sum(len(k) + len(v) + 4 for k, v in body_parts)
    trunc = orjson.dumps(
        {
            "truncated": truncated,
            "omitted_attempts": omitted_attempts,
            "omitted_frames": budget.omitted_frames,
            "omitted_bytes": omitted_bytes,
            "cut_frames": budget.cut_frames,
            "retained_bytes": retained,
        }
    )
    data = mask_known(
        b"{" + head + b"," + _obj(body_parts + [("capture_truncation", trunc)])[1:], record.secrets
    )
    return data, _meta(record, len(data), truncated)


def _head(record: CaptureRecord) -> bytes:
    """The dump's small top-level fields: the members of a JSON object without its braces, in one
    ``orjson.dumps`` (one call per field was a tenth of ``build``)."""
    created = datetime.fromtimestamp(record.created_at, UTC).isoformat()
    head = {
        "version": SCHEMA_VERSION,
        "request_id": _ident(record.request_id),
        "client_request_id": _ident(record.client_request_id) or None,
        "created_at": created,
        "api_key_id": record.api_key_id,
        "api_key_name": _ident(record.api_key_name),
        "client_protocol": record.client_protocol,
        "stream": bool(record.stream),
        "logical_model": _ident(record.logical_model),
        "requested_model": _ident(record.requested_model),
        "status": record.client_status,
        "error": cut_utf8(record.error, 4096) if record.error else None,
        "duration_ms": record.duration_ms,
        "ttfb_ms": record.ttfb_ms,
    }
    return orjson.dumps(head)[1:-1]


def _meta(record: CaptureRecord, raw_bytes: int, truncated: bool) -> DumpMeta:
    return DumpMeta(
        request_id=_ident(record.request_id),
        client_request_id=_ident(record.client_request_id),
        created_at=record.created_at,
        api_key_id=record.api_key_id,
        api_key_name=_ident(record.api_key_name),
        client_protocol=record.client_protocol,
        stream=bool(record.stream),
        logical_model=_ident(record.logical_model),
        status=record.client_status or 0,
        is_error=is_error(record),
        attempt_count=getattr(record.attempts, "seen", len(record.attempts)),
        raw_bytes=raw_bytes,
        truncated=truncated,
    )


def compress(data: bytes) -> bytes:
    """zlib level 3 with a 16 KiB window and a smaller hash table: ``zlib.compress``'s defaults
    spent ~50 us setting up their 256 KiB state for every capture, and level 6 a third more CPU
    than level 3 for blobs ~9 % smaller (issue 20: the writer's CPU is what sheds captures under
    load). Any zlib decompressor reads it; blobs written at level 6 read the same."""
    obj = zlib.compressobj(3, zlib.DEFLATED, 14, 6)
    return obj.compress(data) + obj.flush()


MAX_DECOMPRESSED = 64 * 1024 * 1024


def decompress(blob: bytes) -> bytes:
    """Bounded: a corrupt or hostile blob cannot expand without limit."""
    d = zlib.decompressobj()
    out = d.decompress(bytes(blob), MAX_DECOMPRESSED)
    if d.unconsumed_tail:
        raise ValueError("capture blob expands beyond the decompression bound")
    return out
