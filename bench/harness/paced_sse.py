"""The paced streaming upstream: a Chat Completions SSE stream of N deltas, M ms apart.

nginx cannot pace a response, so this is a separate, tiny server: a bare asyncio ``Protocol`` on
uvloop, no framework, HTTP/1.1 keep-alive, chunked transfer encoding. Deltas are scheduled on an
absolute clock (start + i * interval), so every stream takes the same time whatever the timer
jitter, and the only difference between a direct and a proxied stream is the proxy.

    python bench/harness/paced_sse.py --port 9300 [--deltas 64] [--interval-ms 5]

A non-stream request (no ``"stream": true`` in the body) gets the canned Chat answer.
"""

from __future__ import annotations

import argparse
import asyncio
import time

import orjson
import uvloop

CHUNK_ID = "chatcmpl-bench-paced"
HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
    b"transfer-encoding: chunked\r\n\r\n"
)


def _chunk(payload: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(payload), payload)


def _event(delta: dict, finish: str | None = None, usage: dict | None = None, choices: bool = True) -> bytes:
    obj = {
        "id": CHUNK_ID,
        "object": "chat.completion.chunk",
        "created": 1796032299,
        "model": "bench-model",
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]
        if choices
        else [],
        "usage": usage,
    }
    return b"data: " + orjson.dumps(obj) + b"\n\n"


def build_frames(deltas: int) -> list[bytes]:
    """The stream as HTTP chunks: frame i is written at start + i * interval."""
    frames = [_event({"role": "assistant", "content": ""}) + _event({"content": "tok0 "})]
    frames += [_event({"content": f"tok{i} "}) for i in range(1, deltas)]
    frames[-1] += (
        _event({}, finish="stop")
        + _event(
            {},
            usage={"prompt_tokens": 10, "completion_tokens": deltas, "total_tokens": 10 + deltas},
            choices=False,
        )
        + b"data: [DONE]\n\n"
    )
    return [_chunk(f) for f in frames]


class PacedSSE(asyncio.Protocol):
    frames: list[bytes] = []
    interval: float = 0.005
    plain: bytes = b""

    def __init__(self) -> None:
        self.buf = bytearray()
        self.transport: asyncio.Transport | None = None
        self.busy = False

    def connection_made(self, transport) -> None:  # type: ignore[override]
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buf += data
        if not self.busy:
            self._next()

    def _next(self) -> None:
        end = self.buf.find(b"\r\n\r\n")
        if end < 0:
            return
        head = bytes(self.buf[:end]).lower()
        length = 0
        for line in head.split(b"\r\n")[1:]:
            if line.startswith(b"content-length:"):
                length = int(line.split(b":", 1)[1])
        total = end + 4 + length
        if len(self.buf) < total:
            return
        body = bytes(self.buf[end + 4 : total])
        del self.buf[:total]
        if b'"stream":true' in body.replace(b" ", b""):
            self.busy = True
            asyncio.get_running_loop().create_task(self._stream())
        else:
            assert self.transport is not None
            self.transport.write(
                b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s"
                % (len(self.plain), self.plain)
            )
            self._next()

    async def _stream(self) -> None:
        transport = self.transport
        assert transport is not None
        start = time.monotonic()
        transport.write(HEAD + self.frames[0])
        for i, frame in enumerate(self.frames[1:], 1):
            delay = start + i * self.interval - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            if transport.is_closing():
                return
            transport.write(frame)
        transport.write(b"0\r\n\r\n")
        self.busy = False
        self._next()

    def connection_lost(self, exc) -> None:  # type: ignore[override]
        self.transport = None


async def serve(port: int) -> None:
    server = await asyncio.get_running_loop().create_server(PacedSSE, "127.0.0.1", port, backlog=4096)
    async with server:
        await server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--deltas", type=int, default=64)
    parser.add_argument("--interval-ms", type=float, default=5.0)
    args = parser.parse_args()
    PacedSSE.frames = build_frames(args.deltas)
    PacedSSE.interval = args.interval_ms / 1000
    PacedSSE.plain = orjson.dumps(
        {
            "id": "chatcmpl-bench",
            "object": "chat.completion",
            "created": 1796032299,
            "model": "bench-model",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": "Echo: hello benchmark"},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13},
        }
    )
    uvloop.run(serve(args.port))


if __name__ == "__main__":
    main()
