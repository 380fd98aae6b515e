"""The Responses WebSocket transport on ``GET /v1/responses`` (issue 19) with a real WebSocket
client: ``response.create`` turns answered as JSON text frames, continuation by
``previous_response_id`` from the connection's own history (here towards a Chat upstream, which
has no server-side state), errors as frames on an open connection, authentication at the
handshake."""

from __future__ import annotations

import orjson
import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from tests.servers import make_key, make_route


def _events(ws) -> list[dict]:
    events = []
    while True:
        event = orjson.loads(ws.recv(timeout=30))
        events.append(event)
        if event["type"] in ("response.completed", "response.failed", "response.incomplete", "error"):
            return events


def test_turns_and_continuation_over_one_connection(gateway, mock_upstream):
    make_route("chat_completion", "e2e-ws", mock_upstream.base_url("chat_completion"), upstream_model="up-ws")
    _, secret = make_key()
    gateway.wait_config()
    mock_upstream.clear()
    url = gateway.url.replace("http://", "ws://") + "/v1/responses"
    with connect(url, additional_headers={"authorization": f"Bearer {secret}"}) as ws:
        ws.send(orjson.dumps({"type": "response.create", "model": "e2e-ws", "input": "first turn"}).decode())
        first = _events(ws)
        assert [e["type"] for e in first[:2]] == ["response.created", "response.in_progress"]
        done = first[-1]
        assert done["type"] == "response.completed"
        assert done["response"]["output"][-1]["content"][0]["text"] == "Echo: first turn"
        assert any(e["type"] == "response.output_text.delta" for e in first)

        ws.send(orjson.dumps({"type": "response.create", "model": "e2e-ws", "input": "second turn",
                              "previous_response_id": done["response"]["id"]}).decode())
        second = _events(ws)
        assert second[-1]["type"] == "response.completed"
        assert second[-1]["response"]["output"][-1]["content"][0]["text"] == "Echo: second turn"
        upstream_messages = mock_upstream.requests()[-1]["body"]["messages"]
        texts = [m["content"] if isinstance(m["content"], str) else m["content"][0]["text"] for m in upstream_messages]
        assert texts == ["first turn", "Echo: first turn", "second turn"], "the continuation carried the history"

        ws.send("not json")
        assert orjson.loads(ws.recv(timeout=10))["type"] == "error"
        ws.send(orjson.dumps({"type": "response.create", "model": "e2e-ws-missing", "input": "x"}).decode())
        error = orjson.loads(ws.recv(timeout=10))
        assert error["type"] == "error" and error["status"] == 404
        ws.send(orjson.dumps({"type": "response.create", "model": "e2e-ws", "input": "still open"}).decode())
        assert _events(ws)[-1]["type"] == "response.completed"


def test_handshake_needs_a_key(gateway):
    url = gateway.url.replace("http://", "ws://") + "/v1/responses"
    with pytest.raises(InvalidStatus):
        with connect(url, additional_headers={"authorization": "Bearer sk-gw-wrong-000000000000"}):
            pass
