"""Repairs for ``apply_patch`` text restored by ``field_custom_tools_to_function``.

Models that were handed ``apply_patch`` as a JSON function often produce patches with the usual
mistakes; the client's freeform tool would reject them. :func:`normalize_patch` fixes, on the
complete patch text:

- ``*** Begin Patch ...`` / ``*** End Patch ...`` lines become exactly ``*** Begin Patch`` /
  ``*** End Patch``;
- ``*** End of File`` markers (also ``*** End of File ***``, any case) are removed, and an outer
  ``<invoke ...>...</invoke>`` wrapper is reduced to its trimmed inner text;
- content lines of an ``*** Add File`` section get a ``+`` prefix unless they already start with
  ``+``, ``-`` or ``\\``; the section ends at the next patch marker (``*** Add File``,
  ``*** Update File``, ``*** Delete File``, ``*** Move to``, ``*** End Patch``) or ``@@`` header.
  Only the grammar's own markers end a section: a content line that merely starts with ``***``
  (a Markdown rule or bold text in a new ``.md`` file) is content and gets its ``+``;
- inside ``*** Update File`` sections, deletions are kept, and a hunk without context lines whose
  deleted lines equal its added lines (a no-op) is removed; a section left without hunks (and
  without a ``*** Move to``) is removed with its header.

Every output line ends with ``\\n``. One deliberate difference from the reference: the ``+``/
``-``/``\\`` test looks at the raw line, not the left-trimmed one, so an indented content line such
as ``  - item`` in a new YAML or Markdown file is still prefixed (the reference left it bare,
which makes the patch invalid).
"""

from __future__ import annotations

BEGIN = "*** Begin Patch"
END = "*** End Patch"
ADD = "*** Add File"
UPDATE = "*** Update File"
MOVE = "*** Move to"
DELETE = "*** Delete File"
_SECTION_MARKERS = (ADD, UPDATE, DELETE, MOVE, BEGIN, END)


def is_marker(line: str) -> bool:
    """Whether ``line`` is one of the patch grammar's own ``***`` lines (not content that merely
    starts with ``***``)."""
    return line.strip().startswith(_SECTION_MARKERS)


_EOF_MARKERS = frozenset({"*** end of file", "*** end of file ***"})


def strip_invoke(text: str) -> str:
    """``<invoke name="apply_patch">PATCH</invoke>`` -> ``PATCH`` (trimmed)."""
    trimmed = text.strip()
    if trimmed.startswith("<invoke") and trimmed.endswith("</invoke>"):
        close = trimmed.find(">")
        if close != -1 and close < len(trimmed) - len("</invoke>"):
            return trimmed[close + 1 : -len("</invoke>")].strip()
    return text


def normalize_patch(text: str) -> str:
    text = strip_invoke(text)
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    out: list[str] = []
    in_add = False
    for raw in lines:
        line = raw[:-1] if raw.endswith("\r") else raw
        stripped = line.strip()
        if stripped.lower() in _EOF_MARKERS:
            in_add = False
            continue
        if stripped.startswith(BEGIN):
            out.append(BEGIN)
            in_add = False
            continue
        if stripped.startswith(END):
            out.append(END)
            in_add = False
            continue
        if is_marker(stripped):
            in_add = stripped.startswith(ADD)
            out.append(line)
            continue
        if in_add:
            if line.startswith("@@"):
                in_add = False
            elif not line.startswith(("+", "-", "\\")):
                line = "+" + line
        out.append(line)
    return "".join(f"{line}\n" for line in _drop_noop_hunks(out))


def _drop_noop_hunks(lines: list[str]) -> list[str]:
    out: list[str] = []
    i, n = 0, len(lines)
    while i < n:
        line = lines[i]
        if not line.startswith(UPDATE):
            out.append(line)
            i += 1
            continue
        # Collect the section: header, optional Move to, then hunk lines until the next *** line.
        header = [line]
        i += 1
        while i < n and lines[i].startswith(MOVE):
            header.append(lines[i])
            i += 1
        body_start = i
        while i < n and not is_marker(lines[i]):
            i += 1
        hunks = _split_hunks(lines[body_start:i])
        kept = [h for h in hunks if not _is_noop(h)]
        if kept or len(header) > 1 or not hunks:
            out.extend(header)
            for hunk in kept:
                out.extend(hunk)
    return out


def _split_hunks(body: list[str]) -> list[list[str]]:
    hunks: list[list[str]] = []
    for line in body:
        if line.startswith("@@") or not hunks:
            hunks.append([line])
        else:
            hunks[-1].append(line)
    return hunks


def _is_noop(hunk: list[str]) -> bool:
    """Only ``-``/``+`` lines (no context; an empty line is context) with equal bodies."""
    body = hunk[1:] if hunk and hunk[0].startswith("@@") else hunk
    minus: list[str] = []
    plus: list[str] = []
    for line in body:
        if line.startswith("-"):
            minus.append(line[1:])
        elif line.startswith("+"):
            plus.append(line[1:])
        else:
            return False
    return bool(minus) and minus == plus
