"""JSON-able views of URP objects, for captures and the capture viewer.

Only used when a request is captured. ``to_jsonable`` is the plain Python walk (it avoids
``dataclasses.asdict``, which deep-copies, and caches each class's field names);
``to_json_bytes`` gives the same JSON from orjson's C walk and is what the request path uses.
"""

from __future__ import annotations

import base64
import dataclasses
from functools import cache
from typing import Any

import orjson


@cache
def _field_names(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls))


def to_jsonable(obj: Any) -> Any:
    """Dataclasses become dicts (nodes and events gain a ``type`` key naming their kind), lists,
    tuples and sets become lists, dict keys become strings, bytes become base64 text, and any
    other non-JSON value becomes its ``repr`` so a capture can always be written."""
    if obj is None or isinstance(obj, str | bool | int | float):
        return obj
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple | set | frozenset):
        return [to_jsonable(v) for v in obj]
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        out: dict[str, Any] = {}
        kind = getattr(type(obj), "type", None)
        if isinstance(kind, str):
            out["type"] = kind
        for name in _field_names(type(obj)):
            out[name] = to_jsonable(getattr(obj, name))
        return out
    if isinstance(obj, bytes | bytearray):
        return base64.b64encode(bytes(obj)).decode()
    return repr(obj)


@cache
def _plan(cls: type) -> tuple[str | None, tuple[str, ...]]:
    kind = getattr(cls, "type", None)
    return (kind if isinstance(kind, str) else None), _field_names(cls)


def _default(obj: Any) -> Any:
    """orjson's fallback: what :func:`to_jsonable` does for one value orjson does not encode."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        kind, names = _plan(type(obj))
        out: dict[str, Any] = {"type": kind} if kind is not None else {}
        for name in names:
            out[name] = getattr(obj, name)
        return out
    if isinstance(obj, set | frozenset):
        return list(obj)
    if isinstance(obj, bytes | bytearray):
        return base64.b64encode(bytes(obj)).decode()
    return repr(obj)


_OPTIONS = orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_NON_STR_KEYS


def to_json_bytes(obj: Any) -> bytes:
    """``orjson.dumps(to_jsonable(obj))`` in one pass, 5-10x faster: orjson walks the lists,
    dicts and strings in C and calls back only for dataclasses. A capture snapshots a URP object
    that rules are about to mutate with this (an immutable copy), on the request path."""
    try:
        return orjson.dumps(obj, default=_default, option=_OPTIONS)
    except (TypeError, orjson.JSONEncodeError):  # nesting orjson refuses; may raise again (big ints)
        return orjson.dumps(to_jsonable(obj), default=repr, option=orjson.OPT_NON_STR_KEYS)
