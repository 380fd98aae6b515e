"""Canonical JSON of typed objects and its xxHash3-128 digest: restart-stable names for prompt
prefixes (cache keys, sticky-routing bindings). No per-process seed, unlike ``hash()``."""

from __future__ import annotations

import json
from typing import Any

import xxhash

from .nodes import INTERNAL_PREFIX
from .serialize import to_jsonable


def _scrub(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            k: _scrub(v)
            for k, v in value.items()
            if not (isinstance(k, str) and k.startswith(INTERNAL_PREFIX))
        }
    if isinstance(value, list):
        return [_scrub(v) for v in value]
    return value


def jsonable(value: Any) -> Any:
    """Typed objects (nodes, tools, response format) as plain JSON without gateway-internal keys
    (wire shape hints, provenance), so the same prompt written in two shapes names alike."""
    return _scrub(to_jsonable(value))


def canonical_json(value: Any) -> bytes:
    """Compact JSON with object keys sorted at every level (UTF-8, non-ASCII kept)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def xxh3_128_hex(value: Any) -> str:
    """xxHash3-128 of the canonical JSON, 32 lowercase hex digits."""
    return xxhash.xxh3_128_hexdigest(canonical_json(value))
