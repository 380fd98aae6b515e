"""Time to first byte and total time of streamed responses, over one keep-alive connection.

wrk cannot see inside a response, so streams are timed here: a raw asyncio connection and
httptools' response parser (the same parser uvicorn uses), so the client adds next to nothing and
adds the same to the direct and the proxied figure. "First byte" is the first byte of the
response *body* (the first SSE event), not the status line: a proxy that flushed headers early
would otherwise look faster than it is.
"""

from __future__ import annotations

import asyncio
import time

import httptools


class _Parser:
    def __init__(self) -> None:
        self.status = 0
        self.first_body: float | None = None
        self.done = False
        self.body = bytearray()
        self.keep_body = False

    def on_body(self, data: bytes) -> None:
        if self.first_body is None:
            self.first_body = time.perf_counter()
        if self.keep_body:
            self.body += data

    def on_message_complete(self) -> None:
        self.done = True


def build_request(port: int, path: str, body: bytes, headers: dict[str, str]) -> bytes:
    lines = [
        f"POST {path} HTTP/1.1",
        f"host: 127.0.0.1:{port}",
        "content-type: application/json",
        f"content-length: {len(body)}",
        "accept: text/event-stream",
    ]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


async def _one(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, raw: bytes, keep_body: bool
) -> tuple[float, float, int, bytes]:
    state = _Parser()
    state.keep_body = keep_body
    parser = httptools.HttpResponseParser(state)
    t0 = time.perf_counter()
    writer.write(raw)
    while not state.done:
        data = await reader.read(65536)
        if not data:
            raise ConnectionError("server closed the connection mid-response")
        parser.feed_data(data)
    t1 = time.perf_counter()
    first = state.first_body if state.first_body is not None else t1
    return (first - t0) * 1000, (t1 - t0) * 1000, parser.get_status_code(), bytes(state.body)


async def measure(
    port: int, path: str, body: bytes, headers: dict[str, str], n: int, warmup: int = 3
) -> tuple[list[float], list[float]]:
    """(first-byte ms, total ms) for ``n`` sequential streams after ``warmup`` untimed ones."""
    raw = build_request(port, path, body, headers)
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        first, total = [], []
        for i in range(warmup + n):
            f, t, status, _ = await _one(reader, writer, raw, keep_body=False)
            if status != 200:
                raise RuntimeError(f"{path} on {port}: HTTP {status}")
            if i >= warmup:
                first.append(f)
                total.append(t)
        return first, total
    finally:
        writer.close()


async def fetch(port: int, path: str, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
    """One request, whole body back (for the correctness check before a case is timed)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        _, _, status, data = await _one(
            reader, writer, build_request(port, path, body, headers), keep_body=True
        )
        return status, data
    finally:
        writer.close()
