"""Dotted-path helpers shared by ``field_set`` and ``field_remove`` (and any transform that
addresses a raw JSON map by an operator-written path).

A path is split on ``.``; empty segments are dropped (``"a..b."`` is ``"a.b"``) and a path with
no segment addresses nothing. Segments are always object keys: there is no array indexing, so
``"a.0"`` means the key ``"0"``. Paths are split once when a rule is built, never per request.
"""

from __future__ import annotations

from typing import Any

from gateway.urp.nodes import INTERNAL_PREFIX

ABSENT: Any = object()
"""Returned by :func:`get_path` when the path does not exist (JSON null is a real value)."""


def split_path(path: str) -> tuple[str, ...]:
    return tuple(seg for seg in path.split(".") if seg)


def has_internal_segment(segments: tuple[str, ...]) -> bool:
    """Internal ``_gw_`` markers are the gateway's own bookkeeping; rules must not address them."""
    return any(seg.startswith(INTERNAL_PREFIX) for seg in segments)


def get_path(root: dict[str, Any], segments: tuple[str, ...]) -> Any:
    """The value at ``segments``, or :data:`ABSENT` when any step is missing or not an object."""
    if not segments:
        return ABSENT
    cur: Any = root
    for seg in segments:
        if not isinstance(cur, dict) or seg not in cur:
            return ABSENT
        cur = cur[seg]
    return cur


def set_path(root: dict[str, Any], segments: tuple[str, ...], value: Any) -> None:
    """Write ``value`` at ``segments``, creating intermediate objects; an intermediate that exists
    but is not an object is replaced by ``{}`` (the operator asked for that shape)."""
    if not segments:
        return
    cur = root
    for seg in segments[:-1]:
        nxt = cur.get(seg)
        if not isinstance(nxt, dict):
            nxt = {}
            cur[seg] = nxt
        cur = nxt
    cur[segments[-1]] = value


def remove_path(root: dict[str, Any], segments: tuple[str, ...]) -> bool:
    """Delete the last key when every intermediate exists and is an object. Empty parents stay.
    Returns whether something was removed."""
    if not segments:
        return False
    cur: Any = root
    for seg in segments[:-1]:
        cur = cur.get(seg) if isinstance(cur, dict) else None
        if not isinstance(cur, dict):
            return False
    if segments[-1] in cur:
        del cur[segments[-1]]
        return True
    return False
