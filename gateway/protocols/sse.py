"""Incremental Server-Sent Events parsing and framing."""

from __future__ import annotations

from collections.abc import Iterator

from .base import json_text


class SSEParser:
    """Feed raw bytes as they arrive; get (event, data) pairs for each complete event.

    Handles CRLF/CR/LF line endings, multi-line ``data:``, comments and events split across
    reads. ``event`` is None when the frame had no ``event:`` line.
    """

    __slots__ = ("_buf", "_event", "_data")

    def __init__(self) -> None:
        self._buf = b""
        self._event: str | None = None
        self._data: list[str] = []

    def feed(self, chunk: bytes) -> Iterator[tuple[str | None, str]]:
        buf = self._buf + chunk
        if b"\r" in buf:
            # A trailing lone CR may be the first half of CRLF: keep it for the next read.
            tail = b""
            if buf.endswith(b"\r"):
                buf, tail = buf[:-1], b"\r"
            buf = buf.replace(b"\r\n", b"\n").replace(b"\r", b"\n") + tail
        lines = buf.split(b"\n")
        self._buf = lines.pop()
        for raw in lines:
            line = raw.decode("utf-8", "replace")
            if not line:
                if self._data or self._event is not None:
                    yield self._event, "\n".join(self._data)
                self._event, self._data = None, []
                continue
            if line.startswith(":"):
                continue
            name, _, value = line.partition(":")
            if value.startswith(" "):
                value = value[1:]
            if name == "data":
                self._data.append(value)
            elif name == "event":
                self._event = value

    def close(self) -> Iterator[tuple[str | None, str]]:
        """Flush a final event that was not followed by a blank line."""
        if self._buf:
            yield from self.feed(b"\n")
        if self._data:
            yield self._event, "\n".join(self._data)
        self._event, self._data = None, []


def frame(data: dict | str, event: str | None = None) -> bytes:
    """One SSE frame. ``data`` is JSON-encoded unless it is already a string."""
    payload = json_text(data)
    if event is None:
        return f"data: {payload}\n\n".encode()
    return f"event: {event}\ndata: {payload}\n\n".encode()


DONE = b"data: [DONE]\n\n"
