"""Incremental Server-Sent Events parsing and framing."""

from __future__ import annotations

from collections.abc import Iterator

from .base import json_text

MAX_LINE = 16 * 1024 * 1024  # bytes of one SSE line (and of one event's data), at most


class SSELineTooLong(ValueError):
    """The upstream sent a line (or an event) longer than the parser's limit."""


def _event_block(block: bytes) -> tuple[str, str] | None:
    """``event: NAME\ndata: DATA`` (nothing else) as (NAME, DATA), else None."""
    nl = block.find(b"\n")
    if nl > 0 and block[nl + 1 : nl + 7] == b"data: " and block.find(b"\n", nl + 1) < 0:
        return block[7:nl].decode("utf-8", "replace"), block[nl + 7 :].decode("utf-8", "replace")
    return None


class SSEParser:
    """Feed raw bytes as they arrive; get (event, data) pairs for each complete event.

    Handles CRLF/CR/LF line endings, multi-line ``data:``, comments and events split across
    reads. ``event`` is None when the frame had no ``event:`` line.

    Linear in the input: a partial line waits in a growing ``bytearray`` and each chunk is
    scanned once (the old ``buf + chunk`` re-copied and re-split the whole pending line on every
    read, the square of the line length). A line or event beyond ``max_line`` bytes raises
    :class:`SSELineTooLong` (issue 13: one upstream must not cost unbounded memory or CPU).
    """

    __slots__ = ("_buf", "_event", "_data", "_size", "_cr", "max_line")

    def __init__(self, max_line: int | None = None) -> None:
        self._buf = bytearray()
        self._event: str | None = None
        self._data: list[str] = []
        self._size = 0  # bytes of data in the event being built
        self._cr = False  # the previous chunk ended with CR (its LF may start this one)
        self.max_line = MAX_LINE if max_line is None else max_line

    def feed(self, chunk: bytes) -> Iterator[tuple[str | None, str]]:
        if self._cr and chunk[:1] == b"\n":
            chunk = chunk[1:]
        self._cr = chunk[-1:] == b"\r"
        # ``find``, not ``in``, for bytes here and in the capture screens: CPython 3.11 first tries
        # a bytes needle as an integer and formats the TypeError it then discards (2x the time).
        if chunk.find(b"\r") >= 0:
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        if not self._buf and not self._data and self._event is None:
            end = chunk.rfind(b"\n\n")
            if end >= 0:  # whole events, at an event boundary: event by event, not line by line
                limit = self.max_line
                for block in chunk[:end].split(b"\n\n"):
                    # the common shapes, one data line with or without an event line before it,
                    # cut out directly; anything else line by line (``_lines``, the same result)
                    if len(block) <= limit:
                        if block[:6] == b"data: " and block.find(b"\n") < 0:
                            yield None, block[6:].decode("utf-8", "replace")
                            continue
                        if block[:7] == b"event: " and (event := _event_block(block)) is not None:
                            yield event
                            continue
                    yield from self._lines(block.split(b"\n"))
                    yield from self._lines([b""])
                chunk = chunk[end + 2 :]
                if not chunk:
                    return
        nl = chunk.rfind(b"\n")
        if nl < 0:
            self._buf += chunk
            if len(self._buf) > self.max_line:
                self._buf = bytearray()
                raise SSELineTooLong(f"SSE line longer than {self.max_line} bytes")
            return
        if self._buf:
            self._buf += chunk[:nl]
            data = bytes(self._buf)
        else:
            data = chunk[:nl]
        self._buf = bytearray(chunk[nl + 1 :])
        yield from self._lines(data.split(b"\n"))
        if len(self._buf) > self.max_line:
            self._buf = bytearray()
            raise SSELineTooLong(f"SSE line longer than {self.max_line} bytes")

    def _lines(self, lines: list[bytes]) -> Iterator[tuple[str | None, str]]:
        for raw in lines:
            if len(raw) > self.max_line:
                raise SSELineTooLong(f"SSE line longer than {self.max_line} bytes")
            line = raw.decode("utf-8", "replace")
            if not line:
                if self._data or self._event is not None:
                    yield self._event, "\n".join(self._data)
                self._event, self._data, self._size = None, [], 0
                continue
            if line.startswith(":"):
                continue
            name, _, value = line.partition(":")
            if value.startswith(" "):
                value = value[1:]
            if name == "data":
                self._size += len(value) + 1
                if self._size > self.max_line:
                    self._event, self._data, self._size = None, [], 0
                    raise SSELineTooLong(f"SSE event longer than {self.max_line} bytes")
                self._data.append(value)
            elif name == "event":
                self._event = value

    def close(self) -> Iterator[tuple[str | None, str]]:
        """Flush a final event that was not followed by a blank line."""
        self._cr = False
        if self._buf:
            yield from self.feed(b"\n")
        if self._data:
            yield self._event, "\n".join(self._data)
        self._event, self._data, self._size = None, [], 0


def frame(data: dict | str, event: str | None = None) -> bytes:
    """One SSE frame. ``data`` is JSON-encoded unless it is already a string."""
    payload = json_text(data)
    if event is None:
        return f"data: {payload}\n\n".encode()
    return f"event: {event}\ndata: {payload}\n\n".encode()


DONE = b"data: [DONE]\n\n"
