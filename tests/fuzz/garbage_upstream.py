"""An upstream that answers garbage, deterministically, for the live upstream-side fuzz test.

Served by uvicorn in a background thread (like the mock upstream). It speaks whatever protocol
the request path names and picks its answer from the ``fuzzcase-<n>`` marker the gateway
forwards in the client's text, so retries of one client request get the same answer:

- an HTTP error whose message quotes the channel key and an internal URL (the gateway must mask
  both);
- a 200 that is not JSON, or an embedded error object quoting the key;
- a body or stream cut off half-way;
- the other shape (JSON for a stream request, SSE for a whole one);
- most often, a valid answer (from the mock's wire modules) with a few random mutations.
"""

from __future__ import annotations

import random
import re
from typing import Any

import orjson

from gateway.mock_upstream.asgi import answer_lifespan
from tests.servers import ThreadedUvicorn, free_port

from .corpus import mutate, response_seeds, stream_seeds

_CASE = re.compile(rb"fuzzcase-(\d+)")
_KEY_HEADERS = (b"authorization", b"x-api-key", b"x-goog-api-key")


def _protocol(path: str) -> str | None:
    if path.endswith("/chat/completions"):
        return "chat_completion"
    if path.endswith("/responses"):
        return "responses"
    if path.endswith("/messages"):
        return "messages"
    if ":generateContent" in path or ":streamGenerateContent" in path:
        return "gemini"
    return None


def _sse(frames: list[tuple[str | None, str]]) -> bytes:
    out = []
    for name, data in frames:
        head = f"event: {name}\n" if name else ""
        out.append(f"{head}data: {data}\n\n")
    return "".join(out).encode()


def _dumps(value: Any) -> str:
    try:
        return orjson.dumps(value).decode()
    except orjson.JSONEncodeError:
        import json

        return json.dumps(value)


def answer(protocol: str, case: int, stream: bool, key: str) -> tuple[int, str, bytes]:
    """(status, content type, body) for one request; the same inputs give the same answer."""
    rng = random.Random(f"{protocol}-{case}-{stream}")
    leak = f"key {key} rejected by https://internal.example.com/v1/secret (10.1.2.3)"
    kind = case % 10
    if kind == 0:
        status = rng.choice([400, 401, 404, 429, 500, 503])
        return (
            status,
            "application/json",
            orjson.dumps({"error": {"message": leak, "type": "x", "code": "y"}}),
        )
    if kind == 1:
        return 200, rng.choice(["text/html", "application/json"]), b"<html><body>Bad gateway " + leak.encode()
    if kind == 2:
        return 200, "application/json", orjson.dumps({"error": {"message": leak, "code": 400, "type": "bad"}})
    if kind == 3:  # cut off half-way
        if stream:
            frames = rng.choice(stream_seeds(protocol))
            return 200, "text/event-stream", _sse(frames[: max(1, len(frames) // 2)])[:-3]
        raw = orjson.dumps(rng.choice(response_seeds(protocol)))
        return 200, "application/json", raw[: len(raw) // 2]
    if kind == 4:  # the other shape
        if stream:
            return 200, "application/json", orjson.dumps(rng.choice(response_seeds(protocol)))
        return 200, "text/event-stream", _sse(rng.choice(stream_seeds(protocol)))
    if not stream:
        return 200, "application/json", _dumps(mutate(rng, rng.choice(response_seeds(protocol)))).encode()
    frames = list(rng.choice(stream_seeds(protocol)))
    for _ in range(rng.randint(1, 3)):
        i = rng.randrange(len(frames))
        name, data = frames[i]
        try:
            frames[i] = (name, _dumps(mutate(rng, orjson.loads(data), max_ops=2)))
        except orjson.JSONDecodeError:
            frames[i] = (rng.choice([None, "error", "banana"]), data)
    return 200, "text/event-stream", _sse(frames)


class GarbageUpstream:
    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.seen = 0
        self._uvicorn: ThreadedUvicorn | None = None

    async def app(self, scope, receive, send) -> None:
        if scope["type"] == "lifespan":
            await answer_lifespan(receive, send)
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        self.seen += 1
        protocol = _protocol(scope["path"])
        found = _CASE.search(body)
        headers = dict(scope["headers"])
        key = next(
            (headers[h].decode("latin-1").removeprefix("Bearer ") for h in _KEY_HEADERS if h in headers), ""
        )
        if protocol is None or found is None:
            status, ctype, payload = 404, "application/json", b'{"error": {"message": "no route"}}'
        else:
            try:
                stream = bool(orjson.loads(body).get("stream")) or "streamGenerateContent" in scope["path"]
            except (orjson.JSONDecodeError, AttributeError):
                stream = False
            status, ctype, payload = answer(protocol, int(found.group(1)), stream, key)
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-type", ctype.encode()),
                    (b"content-length", str(len(payload)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": payload})

    def start(self, timeout: float = 15) -> GarbageUpstream:
        self._uvicorn = ThreadedUvicorn(self.app, self.port, "garbage upstream", interface="asgi3")
        self._uvicorn.start(timeout)
        return self

    def stop(self) -> None:
        if self._uvicorn is not None:
            self._uvicorn.stop()
