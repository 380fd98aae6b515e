"""The Responses WebSocket transport (issue 19; reference §6.1, ``WS1-WS19``): ``GET /v1/responses``
upgraded to a WebSocket, as Codex uses it. A ``generate: false`` create (Codex's pre-warm) is
answered here with an empty completed response, without an upstream call.

Each client text frame ``{"type": "response.create", ...}`` carries the body of a
``POST /v1/responses`` (without ``stream``); the turn runs through the same pipeline as the HTTP
endpoint (rule chains, routing, failover, capture) as a streamed request, and every SSE event
of the answer goes back as one JSON text frame (no ``[DONE]``). ``previous_response_id`` naming
the connection's last response continues the conversation from the connection's own history
(the previous turn's input and output items), so a continuation works whatever the upstream
protocol; an id the connection does not know is forwarded as is (a Responses upstream may).
Authentication is the handshake's ``Authorization`` / ``x-api-key`` header; errors are
``{"type": "error", ...}`` frames and the connection stays open. Protocol-level pings are the
server's (uvicorn answers and sends WebSocket pings).
"""

from __future__ import annotations

import logging
import time
import uuid
from typing import Any

import orjson

from gateway.protocols.sse import SSEParser

from .errors import ClientError
from .exchange import Exchange, client_request_id_from, read_headers
from .limits import client_ip, ip_allowed
from .loopguard import HOP_HEADER, outgoing_hop
from .serve import serve

log = logging.getLogger("gateway.proxy")

WS_ENDPOINT = "/v1/responses (websocket)"  # the request log's and the metrics' endpoint name
RESPONSES_WS_PATHS = frozenset({"/v1/responses", "/responses", "/api/v1/responses", "/api/responses"})
MAX_FRAME = 50 * 1024 * 1024


class _Connection:
    """Per-connection state: the last response's id and the conversation so far (continuation),
    and the loop-guard value every turn's upstream calls carry (``loopguard``)."""

    def __init__(self, hop: str | None = None, client_ip: str = "") -> None:
        self.last_id: str | None = None
        self.history: list[Any] = []
        self.hop = hop
        self.client_ip = client_ip  # for the request log of every turn


def _as_items(value: Any) -> list[Any]:
    if isinstance(value, str):
        return [{"role": "user", "content": value}]
    return list(value) if isinstance(value, list) else []


async def serve_responses_ws(app: Any, scope: dict, receive: Any, send: Any) -> None:
    """One WebSocket connection, until the client closes it."""
    first = await receive()
    if first["type"] != "websocket.connect":
        return
    t0 = time.perf_counter()
    headers = read_headers(scope)
    peer = client_ip(scope, headers, app.config.trusted_proxies)
    snapshot = app.holder.current or await app._wait_snapshot()
    key = app.authenticate(headers, snapshot.keys_by_hash, time.time()) if snapshot is not None else None
    if key is None:
        await send({"type": "websocket.close", "code": 1008, "reason": "invalid or missing API key"})
        _refused(app, peer, headers, t0, None, ClientError(401, "unauthorized", "invalid or missing API key"))
        return
    if key.limits is not None and key.limits.ip_allow and not ip_allowed(key.limits, peer):
        await send(
            {
                "type": "websocket.close",
                "code": 1008,
                "reason": "this API key may not be used from this address",
            }
        )
        _refused(
            app,
            peer,
            headers,
            t0,
            key,
            ClientError(403, "ip_not_allowed", "this API key may not be used from this address"),
        )
        return
    try:  # a handshake that already went through this gateway is a loop: refuse it like HTTP's 508
        hop = (
            outgoing_hop(headers.get(HOP_HEADER), app.config.instance_id) if app.config.instance_id else None
        )
    except ClientError as err:
        await send({"type": "websocket.close", "code": 1008, "reason": err.message[:120]})
        _refused(app, peer, headers, t0, key, err)
        return
    await send({"type": "websocket.accept"})
    conn = _Connection(hop, peer)
    while True:
        message = await receive()
        if message["type"] == "websocket.disconnect":
            return
        if message["type"] != "websocket.receive":
            continue
        text = message.get("text")
        if text is None and message.get("bytes") is not None:
            text = message["bytes"].decode("utf-8", "replace")
        await _turn(app, conn, key, headers, text or "", send)


def _refused(app: Any, peer: str, headers: dict[str, str], t0: float, key: Any, err: ClientError) -> None:
    """A refused handshake (the close frame is its answer) observed like any refused HTTP request:
    metrics, access line, request log (``RecorderSet.finish_unrecorded``)."""
    ex = Exchange(None, "responses", uuid.uuid4().hex, t0)
    ex.endpoint = WS_ENDPOINT
    ex.client_ip = peer
    ex.client_request_id = client_request_id_from(headers)
    ex.key = key
    ex.status, ex.error, ex.headers_sent, ex.finished = err.status, err, True, True
    app.runtime.recorders.finish_unrecorded(ex)


async def _error(send: Any, code: str, message: str, status: int = 400) -> None:
    await send(
        {
            "type": "websocket.send",
            "text": orjson.dumps(
                {
                    "type": "error",
                    "status": status,
                    "error": {"type": "invalid_request_error", "code": code, "message": message},
                }
            ).decode(),
        }
    )


async def _create_event(text: str, send: Any) -> dict[str, Any] | None:
    """The frame as a ``response.create`` event, or None after answering with an error event."""
    if len(text) > MAX_FRAME:
        await _error(send, "request_too_large", "frame too large")
        return None
    try:
        event = orjson.loads(text)
    except orjson.JSONDecodeError:
        await _error(send, "invalid_request", "frame is not valid JSON")
        return None
    if not isinstance(event, dict) or event.get("type") != "response.create":
        await _error(send, "invalid_request", "expected a response.create event")
        return None
    return event


async def _warm_up(conn: _Connection, body: dict[str, Any], send: Any) -> None:
    """``generate: false`` (Codex's pre-warm, sent when the connection opens): nothing is generated
    and nothing goes upstream; the answer is an empty completed response the next turn may
    continue from by its id (the conversation so far is the warm-up's input)."""
    response_id = f"resp_{uuid.uuid4().hex}"
    response: dict[str, Any] = {
        "id": response_id,
        "object": "response",
        "created_at": int(time.time()),
        "status": "completed",
        "model": body.get("model"),
        "output": [],
        "usage": None,
    }
    for seq, kind in enumerate(("response.created", "response.completed")):
        status = "in_progress" if kind == "response.created" else "completed"
        await send(
            {
                "type": "websocket.send",
                "text": orjson.dumps(
                    {"type": kind, "sequence_number": seq, "response": {**response, "status": status}}
                ).decode(),
            }
        )
    conn.last_id = response_id
    conn.history = body["input"]


def _turn_body(conn: _Connection, event: dict[str, Any]) -> dict[str, Any]:
    """The ``POST /v1/responses`` body of a create event: streamed, and continuing from the
    connection's history when it names the connection's last response."""
    body = {k: v for k, v in event.items() if k != "type"}
    if isinstance(body.get("response"), dict):  # some clients nest the body
        body = {**body.pop("response"), **body}
    body["stream"] = True
    input_items = _as_items(body.get("input"))
    previous = body.get("previous_response_id")
    if previous is not None and previous == conn.last_id:
        body.pop("previous_response_id")
        input_items = conn.history + input_items
    body["input"] = input_items
    return body


async def _send_http_error(send: Any, status: int, error_body: bytes) -> None:
    """A turn the HTTP path refused: one ``error`` event with its status and error object."""
    try:
        err = orjson.loads(error_body).get("error", {})
    except (orjson.JSONDecodeError, AttributeError):
        err = {}
    await send(
        {
            "type": "websocket.send",
            "text": orjson.dumps({"type": "error", "status": status, "error": err}).decode(),
        }
    )


async def _turn(app: Any, conn: _Connection, key: Any, headers: dict[str, str], text: str, send: Any) -> None:
    event = await _create_event(text, send)
    if event is None:
        return
    body = _turn_body(conn, event)
    input_items = body["input"]
    if body.get("generate") is False:
        await _warm_up(conn, body, send)
        return

    snapshot = app.holder.current
    parser = SSEParser()
    state: dict[str, Any] = {"status": 200, "error_body": b"", "completed": None}

    async def on_send(message: dict) -> None:
        if message["type"] == "http.response.start":
            state["status"] = message["status"]
            return
        chunk = message.get("body", b"")
        if state["status"] != 200:
            state["error_body"] += chunk
            return
        for _name, data in parser.feed(chunk):
            await _forward(data)

    async def _forward(data: str) -> None:
        if not data or data == "[DONE]":
            return
        try:
            payload = orjson.loads(data)
        except orjson.JSONDecodeError:
            return
        if isinstance(payload, dict) and payload.get("type") == "response.completed":
            state["completed"] = payload.get("response")
        await send({"type": "websocket.send", "text": data})

    ex = Exchange(on_send, "responses", uuid.uuid4().hex, time.perf_counter())  # our own identity
    ex.client_request_id = client_request_id_from(headers)
    ex.endpoint = WS_ENDPOINT
    ex.hop = conn.hop
    ex.client_ip = conn.client_ip
    await serve(app.runtime, ex, snapshot, key, orjson.dumps(body))
    for _name, data in parser.close():
        await _forward(data)
    if state["status"] != 200:
        await _send_http_error(send, state["status"], state["error_body"])
        return
    completed = state["completed"]
    if isinstance(completed, dict) and isinstance(completed.get("id"), str):
        conn.last_id = completed["id"]
        conn.history = input_items + [
            item for item in completed.get("output") or [] if isinstance(item, dict)
        ]
