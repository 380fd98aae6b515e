"""A scripted upstream that plays the model for a coding agent, over any of three protocols.

The bundled mock's ``/_mock/script`` is one global queue consumed by whatever request comes next;
agent CLIs send extra requests of their own (Claude Code's title and token-count calls, retries),
so a queue would hand the tool call to the wrong request. This upstream decides from the request
itself, like a model would:

- the request offers the agent's file tool (``apply_patch`` or ``Write``), either as a JSON
  function (cross-protocol hop) or natively (a Responses ``custom`` tool, a Messages tool), and
  the conversation does not yet hold its result → the tool call, arguments split into many
  fragments (``arg_chunk`` characters each);
- the conversation ends with that tool's result → checks the result text and answers
  ``FINAL_TEXT`` (or ``UNEXPECTED_RESULT`` + what it saw, so the test failure says why);
- anything else (titles, quota probes) → a short plain answer.

The wire bodies come from the mock's hand-written wire modules (independent of our codecs).
Every request is recorded with its path, query, headers and body, and for a streamed answer the
number of SSE frames sent and whether it was the tool call, for the tests' assertions.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from gateway.mock_upstream import inbound
from gateway.mock_upstream.asgi import answer_lifespan, read_body, send_json
from gateway.mock_upstream.behaviour import ToolCall, Turn
from gateway.mock_upstream.wire import WireContext, chat, messages, responses
from tests.servers import ThreadedUvicorn, free_port

FINAL_TEXT = "AGENT-E2E-DONE: the file is written."
UNEXPECTED_RESULT = "AGENT-E2E-UNEXPECTED-TOOL-RESULT:"
SIDE_TEXT = "Agent file task"
_WIRES = {"chat_completion": chat, "responses": responses, "messages": messages}
_ROUTES = {
    "/v1/chat/completions": "chat_completion",
    "/v1/responses": "responses",
    "/v1/messages": "messages",
}


@dataclass
class AgentPlay:
    """What the model does: call ``tool`` with ``arguments`` (the tool's native input: raw patch
    text for a custom tool, a JSON object for a function tool), then accept a result that
    matches ``result_ok``."""

    tool: str
    arguments: Any
    result_ok: re.Pattern[str]
    call_id: str = "call_agent_e2e_1"

    def arguments_for(self, kind: str) -> str:
        """The wire arguments when the upstream sees the tool as ``kind``."""
        if isinstance(self.arguments, str):
            if kind == "custom":
                return self.arguments
            return orjson.dumps({"input": self.arguments}).decode()  # converted custom tool
        return orjson.dumps(self.arguments).decode()


@dataclass
class ScriptedUpstream:
    """The ASGI app. ``play`` is set per test; ``requests`` records everything received."""

    arg_chunk: int = 7
    play: AgentPlay | None = None
    requests: list[dict[str, Any]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def reset(self, play: AgentPlay | None = None) -> None:
        with self._lock:
            self.requests.clear()
            self.play = play

    def recorded(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self.requests)

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] == "lifespan":
            await answer_lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        body_bytes = await read_body(receive)
        try:
            body: Any = orjson.loads(body_bytes) if body_bytes else None
        except orjson.JSONDecodeError:
            body = None
        path = scope["path"].removesuffix("/")
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        record = {
            "method": scope["method"],
            "path": path,
            "query": scope.get("query_string", b"").decode("latin-1"),
            "headers": headers,
            "body": body,
            "frames": 0,
            "tool_call": False,
        }
        with self._lock:
            self.requests.append(record)
        if path == "/v1/messages/count_tokens":
            await send_json(send, 200, {"input_tokens": max(1, len(body_bytes) // 4)})
            return
        protocol = _ROUTES.get(path)
        if protocol is None or scope["method"] != "POST" or not isinstance(body, dict):
            await send_json(send, 404, chat.error_body(404, f"scripted upstream has no route {path}"))
            return
        wire = _WIRES[protocol]
        turn, stream = self.plan(protocol, body)
        ctx = WireContext(
            model=str(body.get("model", "")),
            response_id=f"agent{len(self.requests)}",
            created=int(time.time()),
            arg_chunk=self.arg_chunk,
            include_usage=bool((body.get("stream_options") or {}).get("include_usage"))
            or protocol != "chat_completion",
        )
        if not stream:
            await send_json(send, 200, wire.respond(turn, ctx))
            return
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")],
            }
        )
        record["tool_call"] = bool(turn.tool_calls)
        for frame in wire.stream(turn, ctx):
            record["frames"] += 1
            await send({"type": "http.response.body", "body": frame, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    def plan(self, protocol: str, body: dict[str, Any]) -> tuple[Turn, bool]:
        """The model's answer to this request, and whether to stream it."""
        parse = {
            "chat_completion": inbound.from_chat,
            "responses": inbound.from_responses,
            "messages": inbound.from_messages,
        }[protocol]
        summary = parse(body)
        turn = Turn(input_tokens=10, output_tokens=10)
        play = self.play
        offered = {t.name: t.kind for t in summary.tools}
        if protocol == "responses":  # from_responses does not see a custom tool's kind on every shape
            for tool in body.get("tools") or []:
                if isinstance(tool, dict) and tool.get("type") == "custom" and tool.get("name"):
                    offered[str(tool["name"])] = "custom"
        if play is None or play.tool not in offered:
            turn.text = SIDE_TEXT
        elif summary.tool_results:
            results = " | ".join(summary.tool_results)
            turn.text = (
                FINAL_TEXT if play.result_ok.search(results) else f"{UNEXPECTED_RESULT} {results[:500]}"
            )
        else:
            kind = offered[play.tool]
            turn.tool_calls.append(ToolCall(play.tool, play.arguments_for(kind), play.call_id, kind))
        return turn, bool(body.get("stream"))


class ScriptedUpstreamServer:
    """``ScriptedUpstream`` served by uvicorn in a background thread on a free port."""

    def __init__(self, arg_chunk: int = 7) -> None:
        self.app = ScriptedUpstream(arg_chunk=arg_chunk)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._uvicorn: ThreadedUvicorn | None = None

    def start(self, timeout: float = 15) -> ScriptedUpstreamServer:
        self._uvicorn = ThreadedUvicorn(self.app, self.port, "scripted upstream")
        self._uvicorn.start(timeout)
        return self

    def stop(self) -> None:
        if self._uvicorn is not None:
            self._uvicorn.stop()
