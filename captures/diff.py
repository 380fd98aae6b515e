"""Server-side JSON diff for the capture viewer.

:func:`diff` lists the JSON paths that were added, removed or changed between two documents.
Objects are compared key by key; arrays are aligned with a longest-common-subsequence match on
each element's canonical JSON (``difflib.SequenceMatcher``), so a system message injected at
``messages[0]`` shows as one added element, not as every later message "changed". Replaced runs
of equal length are compared element by element, recursing into them.

:func:`render` pretty-prints a document as lines tagged with the path they show, marking lines
under changed paths, for the side-by-side view (no JavaScript library, no client-side diffing).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from difflib import SequenceMatcher
from typing import Any

import orjson

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
MAX_LINES = 20000
MAX_DIFF_BYTES = 2 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Change:
    op: str  # "added" | "removed" | "changed"
    path: str  # the path in the left document (removed/changed) or the right one (added)
    new_path: str  # the path in the right document (equal to ``path`` unless array items moved)
    old: Any = None
    new: Any = None


def child(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    if _IDENT.match(key):
        return f"{path}.{key}"
    return f"{path}[{orjson.dumps(key).decode()}]"


def _canon(value: Any) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)


def diff(old: Any, new: Any, path: str = "$", new_path: str | None = None) -> list[Change]:
    out: list[Change] = []
    _diff(old, new, path, path if new_path is None else new_path, out)
    return out


def _diff(a: Any, b: Any, pa: str, pb: str, out: list[Change]) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        for key, value in a.items():
            if key not in b:
                out.append(Change("removed", child(pa, key), child(pb, key), old=value))
            elif value != b[key] or type(value) is not type(b[key]):
                _diff(value, b[key], child(pa, key), child(pb, key), out)
        for key, value in b.items():
            if key not in a:
                out.append(Change("added", child(pb, key), child(pb, key), new=value))
        return
    if isinstance(a, list) and isinstance(b, list):
        if a == b:
            return
        matcher = SequenceMatcher(None, [_canon(x) for x in a], [_canon(x) for x in b], autojunk=False)
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            if tag == "equal":
                continue
            if tag == "replace" and i2 - i1 == j2 - j1:
                for k in range(i2 - i1):
                    _diff(a[i1 + k], b[j1 + k], child(pa, i1 + k), child(pb, j1 + k), out)
                continue
            for i in range(i1, i2):
                out.append(Change("removed", child(pa, i), child(pa, i), old=a[i]))
            for j in range(j1, j2):
                out.append(Change("added", child(pb, j), child(pb, j), new=b[j]))
        return
    if a != b or type(a) is not type(b):
        out.append(Change("changed", pa, pb, old=a, new=b))


def marks(changes: list[Change]) -> tuple[dict[str, str], dict[str, str]]:
    """CSS classes by path for the left (old) and right (new) documents."""
    left: dict[str, str] = {}
    right: dict[str, str] = {}
    for c in changes:
        if c.op == "removed":
            left[c.path] = "del"
        elif c.op == "added":
            right[c.path] = "add"
        else:
            left[c.path] = "chg"
            right[c.new_path] = "chg"
    return left, right


@dataclass(frozen=True, slots=True)
class Line:
    text: str
    cls: str
    path: str


def _scalar(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS, default=repr).decode()


def render(doc: Any, mark: dict[str, str], limit: int = MAX_LINES) -> tuple[list[Line], bool]:
    """Pretty-printed lines (two-space indent) with the class of the nearest marked path.
    Returns (lines, cut) where ``cut`` says the document had more than ``limit`` lines."""
    lines: list[Line] = []

    def emit(text: str, cls: str, path: str) -> bool:
        if len(lines) >= limit:
            return False
        lines.append(Line(text, cls, path))
        return True

    def walk(value: Any, path: str, prefix: str, indent: str, cls: str, comma: str) -> bool:
        cls = mark.get(path, cls)
        if isinstance(value, dict) and value:
            if not emit(f"{indent}{prefix}{{", cls, path):
                return False
            items = list(value.items())
            for n, (key, item) in enumerate(items):
                kp = orjson.dumps(str(key)).decode() + ": "
                if not walk(
                    item, child(path, key), kp, indent + "  ", cls, "," if n < len(items) - 1 else ""
                ):
                    return False
            return emit(f"{indent}}}{comma}", cls, path)
        if isinstance(value, list) and value:
            if not emit(f"{indent}{prefix}[", cls, path):
                return False
            for n, item in enumerate(value):
                if not walk(item, child(path, n), "", indent + "  ", cls, "," if n < len(value) - 1 else ""):
                    return False
            return emit(f"{indent}]{comma}", cls, path)
        return emit(f"{indent}{prefix}{_scalar(value)}{comma}", cls, path)

    complete = walk(doc, "$", "", "", "", "")
    return lines, not complete


@dataclass(slots=True)
class SideBySide:
    title: str
    left_title: str
    right_title: str
    changes: list[Change]
    left: list[Line]
    right: list[Line]
    cut: bool
    skipped: bool = False

    @property
    def counts(self) -> dict[str, int]:
        counts = {"added": 0, "removed": 0, "changed": 0}
        for c in self.changes:
            counts[c.op] += 1
        return counts


def side_by_side(title: str, left_title: str, left: Any, right_title: str, right: Any) -> SideBySide:
    """The diff and both rendered sides; documents over ``MAX_DIFF_BYTES`` are not diffed (the
    array alignment is quadratic in the worst case) and come back with ``skipped`` set."""
    size = max(len(_scalar(left)), len(_scalar(right)))
    if size > MAX_DIFF_BYTES:
        return SideBySide(title, left_title, right_title, [], [], [], True, skipped=True)
    changes = diff(left, right)
    lm, rm = marks(changes)
    left_lines, cut_left = render(left, lm)
    right_lines, cut_right = render(right, rm)
    return SideBySide(title, left_title, right_title, changes, left_lines, right_lines, cut_left or cut_right)


def parse_sse_frames(frames: list[str] | None) -> list[Any]:
    """SSE text (whole chunks as sent to a client, or ``event: x\\ndata: y`` / bare data strings as
    recorded from an upstream) -> one item per event: its parsed JSON data, or the text. An event
    name is kept as ``{"event": name, "data": ...}``."""
    out: list[Any] = []
    for chunk in frames or ():
        for block in chunk.split("\n\n"):
            block = block.strip("\n")
            if not block:
                continue
            name = None
            data_lines = []
            plain = True
            for line in block.split("\n"):
                if line.startswith("data:"):
                    value = line[5:]
                    data_lines.append(value[1:] if value.startswith(" ") else value)
                    plain = False
                elif line.startswith("event:"):
                    name = line[6:].strip()
                    plain = False
                elif line.startswith(":"):
                    plain = False  # comment / keep-alive
            if plain:
                data = block
            elif not data_lines:
                continue
            else:
                data = "\n".join(data_lines)
            try:
                value = orjson.loads(data)
            except orjson.JSONDecodeError:
                value = data
            out.append({"event": name, "data": value} if name else value)
    return out
