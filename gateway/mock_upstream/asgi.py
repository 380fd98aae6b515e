"""Raw ASGI plumbing shared by the mock upstream and the test suite's scripted and garbage
upstreams: answering uvicorn's lifespan protocol, reading a request body, sending a JSON reply."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

_JSON = [(b"content-type", b"application/json")]


async def answer_lifespan(receive: Callable, send: Callable) -> None:
    """Acknowledge lifespan startup and shutdown (there is nothing to set up); returns at shutdown."""
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


async def read_body(receive: Callable) -> bytes:
    """The whole request body (what arrived before a client disconnect)."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            break
    return b"".join(chunks)


async def send_json(
    send: Callable, status: int, payload: Any, extra_headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    body = orjson.dumps(payload)
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": _JSON + (extra_headers or []) + [(b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})
