"""The mock upstream ASGI app: routing, fault handling, stream pacing and ``/_mock`` introspection.

Endpoints (a doubled ``/v1/v1`` is accepted as ``/v1``, and the ``/v1`` prefix is optional):

- ``POST /v1/chat/completions``, ``POST /v1/responses``, ``POST /v1/messages``;
- ``POST /v1/images/generations`` (JSON) and ``POST /v1/images/edits`` (multipart), see
  ``wire/images.py``; ``GET /_mock/images/<name>`` serves small test images and
  ``GET /_mock/image_hits`` lists the image paths fetched; a Responses request offering the
  ``image_generation`` tool gets an ``image_generation_call`` item (the 8x8 red sample);
- ``POST /v1/embeddings``, ``POST /v1/completions``, ``POST /v1/responses/compact`` and Gemini
  ``:embedContent`` / ``:batchEmbedContents`` (see ``extras``);
- ``POST /v1/messages/count_tokens``: ``{"input_tokens": ceil(body bytes / 10)}`` (deterministic,
  so tests can compare counts; faults apply as elsewhere);
- ``POST /v1beta/models/{model}:generateContent`` and ``:streamGenerateContent?alt=sse``;
- ``GET /_mock/requests``: recorded protocol requests, newest last, each ``{method, path (as
  received), route (after fault prefix and /v1 normalisation), query, headers (lower-case names),
  body (parsed JSON or null)}``; ``DELETE /_mock/requests`` clears them;
- ``GET /_mock/stats``: in-flight requests, total requests, client disconnects seen, and open TCP
  connections (when served by ``serve()``; the connection asking is counted too);
- ``POST /_mock/script`` (a list of turns, or ``{"turns": [...]}``; each turn ``{"text": ...,
  "tool_calls": [{"name", "arguments"}], "reasoning": ...}``), consumed in order by any protocol
  request; ``GET`` lists the remaining turns, ``DELETE`` clears them;
- ``POST /_mock/reset``: clears requests, fail counters, the script and the simulated prompt caches.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import unquote

import orjson

from gateway.images.samples import PNG_RGB_8
from gateway.mock_upstream import extras as extras_mod
from gateway.mock_upstream import inbound as inbound_mod
from gateway.mock_upstream.asgi import answer_lifespan, read_body, send_json
from gateway.mock_upstream.behaviour import plan_turn, short_id
from gateway.mock_upstream.faults import Faults, from_request
from gateway.mock_upstream.prompt_cache import PromptCache
from gateway.mock_upstream.state import MockState
from gateway.mock_upstream.wire import WireContext, chat, gemini, images, messages, responses

_GEMINI_PATH = re.compile(r"^/(?:v1beta|v1|v1alpha)/models/(.+?):(generateContent|streamGenerateContent)$")
_ROUTES: dict[str, str] = {
    "/v1/chat/completions": "chat_completion",
    "/v1/responses": "responses",
    "/v1/messages": "messages",
    "/v1/messages/count_tokens": "messages",
    "/v1/images/generations": "openai_image",
    "/v1/images/edits": "openai_image",
}
_COUNT_TOKENS = "/v1/messages/count_tokens"
_WIRES = {
    "chat_completion": chat,
    "responses": responses,
    "messages": messages,
    "gemini": gemini,
    "openai_image": images,
}
_SSE = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]


def normalise_path(path: str) -> str:
    """Collapse a doubled ``/v1/v1`` and add a missing ``/v1`` to the three OpenAI/Anthropic paths."""
    while path.startswith("/v1/v1/"):
        path = path[3:]
    if path in ("/chat/completions", "/responses", "/messages", "/messages/count_tokens"):
        path = "/v1" + path
    return path


class MockUpstreamApp:
    """ASGI callable. ``arg_chunk`` is the default size of streamed tool-argument fragments."""

    def __init__(self, *, arg_chunk: int = 3) -> None:
        self.arg_chunk = arg_chunk
        self.state = MockState()

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] == "lifespan":
            await answer_lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        path: str = scope["path"]
        if path.startswith("/_mock/"):
            await self._introspect(scope, receive, send)
            return
        self.state.in_flight += 1
        self.state.total += 1
        try:
            await self._serve(scope, receive, send)
        finally:
            self.state.in_flight -= 1

    # -- introspection ---------------------------------------------------------------------------

    async def _introspect(self, scope: dict, receive: Callable, send: Callable) -> None:
        method, path = scope["method"], scope["path"]
        body = await read_body(receive)
        state = self.state
        if path == "/_mock/requests" and method == "GET":
            await send_json(send, 200, list(state.requests))
        elif path == "/_mock/requests" and method == "DELETE":
            state.requests.clear()
            await send_json(send, 200, {"cleared": True})
        elif path == "/_mock/stats" and method == "GET":
            await send_json(send, 200, state.stats())
        elif path == "/_mock/script" and method == "POST":
            try:
                turns = orjson.loads(body or b"[]")
            except orjson.JSONDecodeError:
                await send_json(send, 400, {"error": "script must be JSON"})
                return
            if isinstance(turns, dict):
                turns = turns.get("turns") or []
            if not isinstance(turns, list) or not all(isinstance(t, dict) for t in turns):
                await send_json(send, 400, {"error": "script must be a list of turn objects"})
                return
            state.script.extend(turns)
            await send_json(send, 200, {"queued": len(state.script)})
        elif path == "/_mock/script" and method == "GET":
            await send_json(send, 200, list(state.script))
        elif path == "/_mock/script" and method == "DELETE":
            state.script.clear()
            await send_json(send, 200, {"cleared": True})
        elif path == "/_mock/reset" and method == "POST":
            state.reset()
            await send_json(send, 200, {"reset": True})
        elif path.startswith("/_mock/images/") and method == "GET":
            served = images.image_bytes(path[len("/_mock/images/") :])
            state.image_hits.append(path)
            if served is None:
                await send_json(send, 404, {"error": "no such image"})
                return
            data, ctype = served
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [
                        (b"content-type", ctype.encode()),
                        (b"content-length", str(len(data)).encode()),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": data})
        elif path == "/_mock/image_hits" and method == "GET":
            await send_json(send, 200, list(state.image_hits))
        elif path == "/_mock/health":
            await send_json(send, 200, {"status": "ok"})
        else:
            await send_json(send, 404, {"error": f"no mock endpoint {method} {path}"})

    # -- protocol requests -----------------------------------------------------------------------

    async def _serve_extra(self, send: Callable, faults: Faults, extra: tuple[int, Any]) -> None:
        """Answer a non-model route (embeddings and the like), honouring the delay and failure faults."""
        if faults.delay_first_byte > 0:  # embeddings and the like take their time too
            await asyncio.sleep(faults.delay_first_byte)
        if self._failing(faults):
            status = faults.status or 500
            await send_json(send, status, chat.error_body(status, f"mock upstream injected HTTP {status}"))
        else:
            await send_json(send, *extra)

    @staticmethod
    async def _send_fault(send: Callable, wire: Any, faults: Faults) -> None:
        """Send the injected HTTP error in the protocol's own error shape (with Retry-After if asked)."""
        status = faults.status or 500
        extra = [(b"retry-after", faults.retry_after.encode())] if faults.retry_after else None
        await send_json(send, status, wire.error_body(status, f"mock upstream injected HTTP {status}"), extra)

    async def _serve(self, scope: dict, receive: Callable, send: Callable) -> None:
        headers = _headers(scope)
        raw_query = scope.get("query_string", b"").decode("latin-1")
        path, faults = from_request(scope["path"], headers)
        path = normalise_path(path)
        body_bytes = await read_body(receive)
        body = self._record(scope, headers, path, raw_query, body_bytes)
        extra = extras_mod.answer(path, body, body_bytes)
        if extra is not None:
            await self._serve_extra(send, faults, extra)
            return
        protocol, model, stream = self._route(path, raw_query, body)
        if protocol is None or scope["method"] != "POST":
            await send_json(
                send, 404, chat.error_body(404, f"mock upstream has no route {scope['method']} {path}")
            )
            return
        wire = _WIRES[protocol]
        if not isinstance(body, dict):
            await send_json(send, 400, wire.error_body(400, "request body must be a JSON object"))
            return

        if faults.hang:
            await self._hang(receive)
            return
        failing = self._failing(faults)
        if faults.delay_first_byte > 0:
            await asyncio.sleep(faults.delay_first_byte)
        if failing:
            await self._send_fault(send, wire, faults)
            return
        if path == _COUNT_TOKENS:
            await send_json(send, 200, {"input_tokens": -(-len(body_bytes) // 10)})
            return
        if protocol == "openai_image":
            base = f"http://{headers.get('host', '127.0.0.1')}"
            await send_json(send, 200, images.respond(path, body, base, int(time.time())))
            return

        summary, turn = self._plan(protocol, body, body_bytes, model, stream, faults)
        ctx = WireContext(
            model=summary.model or model,
            created=int(time.time()),
            response_id=short_id(str(self.state.total), body_bytes.decode("utf-8", "replace")),
            arg_chunk=faults.arg_chunk or self.arg_chunk,
            include_usage=summary.include_usage,
        )
        stream = stream if protocol == "gemini" else summary.stream
        if not stream:
            await send_json(send, 200, wire.respond(turn, ctx), _request_id_header(protocol, ctx))
            return
        if protocol == "gemini" and "alt=sse" not in raw_query:
            # Without alt=sse Gemini streams one JSON array; a whole array is close enough here.
            chunks = [orjson.loads(f[len(b"data: ") :]) for f in gemini.stream(turn, ctx)]
            await send_json(send, 200, chunks)
            return
        await self._stream(send, receive, wire.stream(turn, ctx), faults, _request_id_header(protocol, ctx))

    def _failing(self, faults: Any) -> bool:
        """Whether this request gets the injected error status (always, or its first N times)."""
        if faults.fail_times is not None:
            return self.state.should_fail(faults.fail_key, faults.fail_times)
        return faults.status is not None

    def _record(self, scope: dict, headers: dict, path: str, raw_query: str, body_bytes: bytes) -> Any:
        """The request body (JSON, or the fields of a multipart Images API edit), recorded for
        the tests' introspection."""
        try:
            body: Any = orjson.loads(body_bytes) if body_bytes else None
        except orjson.JSONDecodeError:
            body = None
        if body is None and headers.get("content-type", "").startswith("multipart/form-data"):
            body = images.form_body(body_bytes, headers["content-type"])  # Images API edits
        self.state.requests.append(
            {
                "method": scope["method"],
                "path": scope["path"],
                "route": path,
                "query": raw_query,
                "headers": headers,
                "body": body,
                **(
                    {"body_text": body_bytes[:4096].decode("utf-8", "replace")}
                    if body is None and body_bytes
                    else {}
                ),
            }
        )
        return body

    def _plan(self, protocol: str, body: dict, body_bytes: bytes, model: str, stream: bool, faults: Any):
        """What this turn answers: the request's summary and the planned turn (scripted, or
        echoed), with the hosted image tool's result and the prompt-cache accounting."""
        if protocol == "chat_completion":
            summary = inbound_mod.from_chat(body)
        elif protocol == "responses":
            summary = inbound_mod.from_responses(body)
        elif protocol == "messages":
            summary = inbound_mod.from_messages(body)
        else:
            summary = inbound_mod.from_gemini(body, model, stream)
        summary.input_chars = len(body_bytes)
        scripted = self.state.script.popleft() if self.state.script else None
        turn = plan_turn(summary, scripted)
        if protocol == "responses" and any(
            isinstance(t, dict) and t.get("type") == "image_generation" for t in body.get("tools") or ()
        ):
            turn.image_b64 = PNG_RGB_8  # the hosted image tool "generates" the 8x8 red sample
        if faults.prompt_cache is not None:
            cache = self.state.prompt_caches.setdefault(faults.prompt_cache, PromptCache())
            turn.cache_read_tokens, turn.cache_write_tokens = cache.account(protocol, body, turn.input_tokens)
        return summary, turn

    @staticmethod
    def _route(path: str, raw_query: str, body: Any) -> tuple[str | None, str, bool]:
        protocol = _ROUTES.get(path)
        if protocol is not None:
            model = str(body.get("model", "")) if isinstance(body, dict) else ""
            return protocol, model, bool(isinstance(body, dict) and body.get("stream"))
        match = _GEMINI_PATH.match(path)
        if match:
            return "gemini", unquote(match.group(1)), match.group(2) == "streamGenerateContent"
        return None, "", False

    async def _hang(self, receive: Callable) -> None:
        """Never answer; return once the client has gone away (so in-flight drops back)."""
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                self.state.client_disconnects += 1
                return

    async def _stream(
        self,
        send: Callable,
        receive: Callable,
        frames: Iterator[bytes],
        faults: Faults,
        extra_headers: list[tuple[bytes, bytes]],
    ) -> None:
        gone = asyncio.Event()

        async def watch() -> None:
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    gone.set()
                    return

        watcher = asyncio.create_task(watch())
        try:
            await send({"type": "http.response.start", "status": 200, "headers": _SSE + extra_headers})
            for index, frame in enumerate(frames):
                if faults.disconnect_after is not None and index >= faults.disconnect_after:
                    break
                if faults.stall_after is not None and index >= faults.stall_after:
                    await gone.wait()  # silent but open until the client gives up
                    break
                if faults.malformed_sse and index == 1:
                    frame = b'data: {"this is": not json\n\n'
                if index and faults.frame_delay > 0:
                    try:
                        await asyncio.wait_for(gone.wait(), faults.frame_delay)
                    except TimeoutError:
                        pass
                if gone.is_set():
                    break
                await send({"type": "http.response.body", "body": frame, "more_body": True})
                if faults.malformed_sse and index == 1:
                    break
            if gone.is_set():
                self.state.client_disconnects += 1
                return
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except OSError:  # the client went away while we were writing
            self.state.client_disconnects += 1
        finally:
            watcher.cancel()


def _request_id_header(protocol: str, ctx: WireContext) -> list[tuple[bytes, bytes]]:
    name = b"request-id" if protocol == "messages" else b"x-request-id"
    return [(name, f"req_{ctx.response_id}".encode())]


def _headers(scope: dict) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, value in scope.get("headers", []):
        key = name.decode("latin-1").lower()
        val = value.decode("latin-1")
        out[key] = f"{out[key]}, {val}" if key in out else val
    return out


def create_app(*, arg_chunk: int = 3) -> MockUpstreamApp:
    return MockUpstreamApp(arg_chunk=arg_chunk)


def serve(
    host: str = "127.0.0.1", port: int = 9100, *, arg_chunk: int = 3, log_level: str = "warning"
) -> None:
    """Run the mock with uvicorn in the current thread until interrupted."""
    import uvicorn

    app = create_app(arg_chunk=arg_chunk)
    config = uvicorn.Config(app, host=host, port=port, log_level=log_level, lifespan="on", access_log=False)
    server = uvicorn.Server(config)
    app.state.server_state = server.server_state
    server.run()
