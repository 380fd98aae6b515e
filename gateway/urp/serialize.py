"""JSON-able views of URP objects, for captures and the capture viewer.

Only used when a request is captured, so clarity beats speed here; it still avoids
``dataclasses.asdict`` (which deep-copies) and caches each class's field names.
"""

from __future__ import annotations

import base64
import dataclasses
from functools import cache
from typing import Any


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
