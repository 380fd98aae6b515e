"""One Responses SSE ``data`` field -> its JSON values. Some upstreams concatenate several JSON
objects in one field, so a plain ``orjson.loads`` is tried first and a bounded ``raw_decode``
walk follows; either way the values are held to the nesting limit (``json_depth``). Split from
``stream_decode`` to keep that module under the size limit.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

from ..json_depth import too_deep

_MAX_VALUES = 64
_JSON = json.JSONDecoder()


def parse_data(data: str) -> list[Any]:
    """One SSE data field -> its JSON values (some upstreams concatenate several objects)."""
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError:
        pass
    else:
        if too_deep(value, data):
            raise ValueError("stream event nested too deeply")
        return [value]
    out: list[Any] = []
    i, n = 0, len(data)
    while i < n:
        while i < n and data[i].isspace():
            i += 1
        if i >= n:
            break
        try:
            value, i = _JSON.raw_decode(data, i)  # raises ValueError on garbage
        except RecursionError:  # the stdlib parser recurses per nesting level
            raise ValueError("stream event nested too deeply") from None
        if too_deep(value):
            raise ValueError("stream event nested too deeply")
        out.append(value)
        if len(out) > _MAX_VALUES:
            raise ValueError("too many JSON values in one SSE data field")
    return out
