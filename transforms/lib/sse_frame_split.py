"""Splitting oversized SSE frames after a client StreamEncoder: the machinery of the
``stream_split_sse_frames`` transform, which installs :class:`SplittingEncoder` through the
stream-encoder hook (``Transform.wrap_stream_encoder``), so no codec or proxy module knows it.

Some clients and proxies choke on very long SSE lines. :class:`FrameSplitter` post-processes the
bytes a client StreamEncoder produced: every frame whose ``data:`` line is longer than the limit
and that carries one string-bearing delta is cut into several frames of the same kind whose
strings concatenate to the original:

- Chat Completions: ``choices[0].delta.content``, ``.reasoning_content``, ``.reasoning``,
  ``.refusal``, ``reasoning_details[0].text|summary|data`` and
  ``tool_calls[0].function.arguments`` (or ``.custom.input``);
- Responses: the ``delta`` string of ``*.delta`` events; every later event's
  ``sequence_number`` is renumbered so the sequence stays contiguous;
- Messages: ``content_block_delta`` with ``delta.text|thinking|partial_json``. A
  ``signature_delta`` is never split, unlike the reference: the official Anthropic SDK *replaces*
  a thinking block's signature with each ``signature_delta`` (it does not append), so a split
  signature would reach the client truncated and the next turn would be rejected.

The size is that of the exact ``data: `` line in bytes, i.e. after JSON string escaping. Cuts fall
only between characters (never inside an escape or a multi-byte character); each chunk is the
largest prefix that fits (the reference binary-searches character boundaries; escaping is per
character, so we escape once and step back from the byte budget to the nearest boundary, same
result in O(1) per chunk); a single character that cannot fit is emitted alone. When even the frame without its string does
not fit, the frame is emitted unsplit (the older reference dropped the text; we never do).

Fields that must be seen once stay on the first chunk (Chat ``role``, tool-call ``id``/``name``/
``type``, logprobs and other extras) and the closing ones on the last (``finish_reason``,
``usage``), so SDKs that concatenate string fields rebuild exactly the original message.
Everything else (comments, ``[DONE]``, snapshot events, small frames) passes through unchanged.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

DEFAULT_MAX_FRAME_LENGTH = 131072

_DATA = b"data: "
_SEQ = re.compile(rb'"sequence_number":(\d+)')
_CHAT_DELTA_FIELDS = ("content", "reasoning_content", "reasoning", "refusal")
_DETAIL_FIELDS = ("text", "summary", "data")
# Repeated on every chunk of a reasoning_details entry; other keys only on the first, because
# SDKs merge entries by ``index`` and concatenate every other string (a repeated ``format``
# would arrive as "unknownunknown").
_DETAIL_REPEATED = frozenset({"type", "index"})
_MESSAGES_FIELDS = ("text", "thinking", "partial_json")

_BACKSLASH = 0x5C


def _char_end(esc: bytes, pos: int) -> int:
    """End of the character (escape sequence or UTF-8 sequence) starting at ``pos``."""
    b = esc[pos]
    if b == _BACKSLASH:
        return pos + (6 if esc[pos + 1] == 0x75 else 2)  # \uXXXX or \X
    if b < 0x80:
        return pos + 1
    return pos + (2 if b < 0xE0 else 3 if b < 0xF0 else 4)


def _is_escape_start(esc: bytes, pos: int) -> bool:
    """A backslash at ``pos`` starts an escape when the run of backslashes ending there is odd."""
    run = 0
    while pos >= 0 and esc[pos] == _BACKSLASH:
        run += 1
        pos -= 1
    return run % 2 == 1


def _boundary_at_or_before(esc: bytes, pos: int) -> int:
    """The largest character boundary <= ``pos`` in escaped JSON string bytes."""
    while pos > 0 and 0x80 <= esc[pos] < 0xC0:  # UTF-8 continuation byte: inside a character
        pos -= 1
    for at in range(pos - 1, max(pos - 6, -1), -1):
        if esc[at] != _BACKSLASH:
            continue
        if not _is_escape_start(esc, at):
            at -= 1  # the second byte of a two-byte escape: its start is one before
        if at + (6 if esc[at + 1] == 0x75 else 2) > pos:
            return at  # ``pos`` falls inside the escape that starts at ``at``
        break
    return pos


def split_string(text: str, overhead_of: Any, limit: int) -> list[str] | None:
    """Cut ``text`` into chunks so that ``overhead_of(k) + escaped(chunk)`` fits ``limit``.

    ``overhead_of(k)`` is the line length of chunk ``k`` with an empty string (it may grow with
    ``k``, e.g. a sequence number gaining a digit). JSON escaping is per character, so the text
    is escaped once and each chunk is the largest run of whole escaped characters that fits
    (equivalent to a binary search over character boundaries, in O(1) per chunk). Returns None
    when even an empty chunk does not fit (the caller then leaves the frame alone).
    """
    try:
        esc = orjson.dumps(text)[1:-1]
    except orjson.JSONEncodeError:  # lone surrogates cannot be encoded: leave the frame alone
        return None
    chunks: list[str] = []
    start, n = 0, len(esc)
    while start < n:
        budget = limit - overhead_of(len(chunks))
        if budget < 0:
            return None
        end = start + budget
        if end >= n:
            end = n
        else:
            end = _boundary_at_or_before(esc, end)
            if end <= start:
                end = _char_end(esc, start)  # one character that cannot fit goes out alone
        chunks.append(orjson.loads(b'"' + esc[start:end] + b'"'))
        start = end
    return chunks


def _dump_line(obj: Any) -> bytes:
    return _DATA + orjson.dumps(obj)


class FrameSplitter:
    """Stateful per client stream (the Responses sequence offset lives here)."""

    __slots__ = ("protocol", "limit", "seq_offset")

    def __init__(self, protocol: str, max_frame_length: int) -> None:
        self.protocol = protocol
        self.limit = max(1, int(max_frame_length))
        self.seq_offset = 0

    def process(self, frames: bytes) -> bytes:
        if len(frames) <= self.limit and not self.seq_offset:
            return frames  # no line of it can be longer than the limit
        parts = frames.split(b"\n\n")
        out: list[bytes] = []
        changed = False
        for i, part in enumerate(parts):
            if i == len(parts) - 1:  # text after the last blank line (normally b"")
                out.append(part)
                break
            new = self._frame(part)
            if new is not part:
                changed = True
            out.append(new)
        return b"\n\n".join(out) if changed else frames

    # -- one frame (without its terminating blank line) --------------------------------------
    def _frame(self, frame: bytes) -> bytes:
        lines = frame.split(b"\n")
        data_at = -1
        for j, line in enumerate(lines):
            if line.startswith(b"data:"):
                if data_at != -1:
                    return self._renumber(frame)  # multi-line data: leave it alone
                data_at = j
        if data_at == -1:
            return frame
        line = lines[data_at]
        if len(line) <= self.limit or not line.startswith(_DATA) or line == b"data: [DONE]":
            return self._renumber(frame)
        try:
            obj = orjson.loads(line[len(_DATA) :])
        except orjson.JSONDecodeError:
            return frame
        if not isinstance(obj, dict):
            return frame
        if self.protocol == "chat_completion":
            pieces = self._split_chat(obj)
        elif self.protocol == "responses":
            pieces = self._split_responses(obj)
        elif self.protocol == "messages":
            pieces = self._split_messages(obj)
        else:
            pieces = None
        if pieces is None:
            return self._renumber(frame)
        before, after = lines[:data_at], lines[data_at + 1 :]
        return b"\n\n".join(b"\n".join([*before, piece, *after]) for piece in pieces)

    def _renumber(self, frame: bytes) -> bytes:
        if not self.seq_offset or self.protocol != "responses":
            return frame
        match = _SEQ.search(frame)
        if match is None:
            return frame
        number = int(match.group(1)) + self.seq_offset
        return b'%s"sequence_number":%d%s' % (frame[: match.start()], number, frame[match.end() :])

    # -- Chat Completions --------------------------------------------------------------------
    def _split_chat(self, obj: dict[str, Any]) -> list[bytes] | None:
        choices = obj.get("choices")
        if not isinstance(choices, list) or len(choices) != 1 or not isinstance(choices[0], dict):
            return None
        choice = choices[0]
        delta = choice.get("delta")
        if not isinstance(delta, dict):
            return None
        found = [k for k in _CHAT_DELTA_FIELDS if isinstance(delta.get(k), str) and delta[k]]
        details = delta.get("reasoning_details") or None
        calls = delta.get("tool_calls") or None
        candidates = len(found) + (details is not None) + (calls is not None)
        if candidates != 1:
            return None
        if found:
            key = found[0]

            def build(chunk: str, first: bool, last: bool) -> dict[str, Any]:
                d = {k: v for k, v in delta.items() if first or k == key}
                d[key] = chunk
                return self._chat_wrap(obj, choice, d, first, last)

            return self._pieces(delta[key], build)
        if details is not None:
            if not isinstance(details, list) or len(details) != 1 or not isinstance(details[0], dict):
                return None
            entry = details[0]
            keys = [k for k in _DETAIL_FIELDS if isinstance(entry.get(k), str) and entry[k]]
            if len(keys) != 1:
                return None
            key = keys[0]

            def build(chunk: str, first: bool, last: bool) -> dict[str, Any]:
                e = {k: v for k, v in entry.items() if first or k == key or k in _DETAIL_REPEATED}
                e[key] = chunk
                d = {k: v for k, v in delta.items() if first or k == "reasoning_details"}
                d["reasoning_details"] = [e]
                return self._chat_wrap(obj, choice, d, first, last)

            return self._pieces(entry[key], build)
        if not isinstance(calls, list) or len(calls) != 1 or not isinstance(calls[0], dict):
            return None
        call = calls[0]
        inner_key = "function" if isinstance(call.get("function"), dict) else "custom"
        inner = call.get(inner_key)
        field = "arguments" if inner_key == "function" else "input"
        if not isinstance(inner, dict) or not isinstance(inner.get(field), str) or not inner[field]:
            return None

        def build(chunk: str, first: bool, last: bool) -> dict[str, Any]:
            f = {k: v for k, v in inner.items() if first or k == field}
            f[field] = chunk
            c = {k: v for k, v in call.items() if first or k in ("index", inner_key)}
            c[inner_key] = f
            d = {k: v for k, v in delta.items() if first or k == "tool_calls"}
            d["tool_calls"] = [c]
            return self._chat_wrap(obj, choice, d, first, last)

        return self._pieces(inner[field], build)

    @staticmethod
    def _chat_wrap(
        obj: dict[str, Any], choice: dict[str, Any], delta: dict[str, Any], first: bool, last: bool
    ) -> dict[str, Any]:
        c: dict[str, Any] = {}
        for k, v in choice.items():
            if k == "delta":
                c[k] = delta
            elif k == "finish_reason":
                c[k] = v if last else None
            elif k == "index" or first:
                c[k] = v
        out: dict[str, Any] = {}
        for k, v in obj.items():
            if k == "choices":
                out[k] = [c]
            elif k == "usage":
                if last:
                    out[k] = v
            else:
                out[k] = v
        return out

    # -- Responses ---------------------------------------------------------------------------
    def _split_responses(self, obj: dict[str, Any]) -> list[bytes] | None:
        kind = obj.get("type")
        text = obj.get("delta")
        if not isinstance(kind, str) or not kind.endswith(".delta") or not isinstance(text, str) or not text:
            return None
        seq = obj.get("sequence_number")
        base = seq + self.seq_offset if isinstance(seq, int) and not isinstance(seq, bool) else None

        def build(chunk: str, first: bool, index: int) -> dict[str, Any]:
            out = {}
            for k, v in obj.items():
                if k == "delta":
                    out[k] = chunk
                elif k == "sequence_number" and base is not None:
                    out[k] = base + index
                elif k == "logprobs" and not first and isinstance(v, list):
                    out[k] = []
                else:
                    out[k] = v
            return out

        def overhead(k: int) -> int:
            return len(_dump_line(build("", k == 0, k)))

        chunks = split_string(text, overhead, self.limit)
        if chunks is None or len(chunks) < 2:
            return None
        if base is not None:
            self.seq_offset += len(chunks) - 1
        return [_dump_line(build(chunk, k == 0, k)) for k, chunk in enumerate(chunks)]

    # -- Messages ----------------------------------------------------------------------------
    def _split_messages(self, obj: dict[str, Any]) -> list[bytes] | None:
        if obj.get("type") != "content_block_delta":
            return None
        delta = obj.get("delta")
        if not isinstance(delta, dict):
            return None
        keys = [k for k in _MESSAGES_FIELDS if isinstance(delta.get(k), str) and delta[k]]
        if len(keys) != 1:
            return None
        key = keys[0]

        def build(chunk: str, first: bool, last: bool) -> dict[str, Any]:
            return {k: ({**delta, key: chunk} if k == "delta" else v) for k, v in obj.items()}

        return self._pieces(delta[key], build)

    # -- shared ------------------------------------------------------------------------------
    def _pieces(self, text: str, build: Any) -> list[bytes] | None:
        """Split with a builder ``build(chunk, first, last)``; the first and the last chunk may
        carry more fields than the middle ones, so each chunk's overhead is measured with its own
        wrapper (first / middle / last)."""
        first_o = len(_dump_line(build("", True, False)))
        mid_o = len(_dump_line(build("", False, False)))
        last_o = len(_dump_line(build("", False, True)))
        both_o = len(_dump_line(build("", True, True)))
        if both_o <= self.limit and len(_dump_line(build(text, True, True))) <= self.limit:
            return None
        # The last chunk's extra fields (finish_reason, usage) are only known to be "last" after
        # cutting; reserve room for them in every chunk when they are larger than the middle.
        tail = max(0, last_o - mid_o)
        chunks = split_string(text, lambda k: (first_o if k == 0 else mid_o) + tail, self.limit)
        if chunks is None or len(chunks) < 2:
            return None
        last = len(chunks) - 1
        return [_dump_line(build(chunk, k == 0, k == last)) for k, chunk in enumerate(chunks)]


class SplittingEncoder:
    """A client StreamEncoder whose output goes through a :class:`FrameSplitter`. Keep-alives
    pass untouched; any other attribute is the wrapped encoder's."""

    __slots__ = ("inner", "splitter")

    def __init__(self, inner: Any, splitter: FrameSplitter) -> None:
        self.inner = inner
        self.splitter = splitter

    def encode(self, event: Any) -> bytes:
        return self.splitter.process(self.inner.encode(event))

    def keepalive(self) -> bytes:
        return self.inner.keepalive()

    def error(self, status: int, code: str, message: str) -> bytes:
        return self.splitter.process(self.inner.error(status, code, message))

    def close(self) -> bytes:
        return self.splitter.process(self.inner.close())

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)
