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

from tests.requestlogs.test_e2e_request_logs import wait_rows
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
    key, secret = make_key()
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

        ws.send(
            orjson.dumps(
                {
                    "type": "response.create",
                    "model": "e2e-ws",
                    "input": "second turn",
                    "previous_response_id": done["response"]["id"],
                }
            ).decode()
        )
        second = _events(ws)
        assert second[-1]["type"] == "response.completed"
        assert second[-1]["response"]["output"][-1]["content"][0]["text"] == "Echo: second turn"
        upstream_messages = mock_upstream.requests()[-1]["body"]["messages"]
        texts = [
            m["content"] if isinstance(m["content"], str) else m["content"][0]["text"]
            for m in upstream_messages
        ]
        assert texts == ["first turn", "Echo: first turn", "second turn"], (
            "the continuation carried the history"
        )

        ws.send("not json")
        assert orjson.loads(ws.recv(timeout=10))["type"] == "error"
        ws.send(orjson.dumps({"type": "response.create", "model": "e2e-ws-missing", "input": "x"}).decode())
        error = orjson.loads(ws.recv(timeout=10))
        assert error["type"] == "error" and error["status"] == 404
        ws.send(orjson.dumps({"type": "response.create", "model": "e2e-ws", "input": "still open"}).decode())
        assert _events(ws)[-1]["type"] == "response.completed"
    rows = wait_rows(4, api_key=key)  # one per turn that reached a model, with the client address
    assert len(rows) == 4 and {row.client_ip for row in rows} == {"127.0.0.1"}


def test_handshake_needs_a_key(gateway):
    url = gateway.url.replace("http://", "ws://") + "/v1/responses"
    with pytest.raises(InvalidStatus):
        with connect(url, additional_headers={"authorization": "Bearer sk-gw-wrong-000000000000"}):
            pass


def test_turns_carry_the_loop_guard_and_a_looped_handshake_is_refused(gateway, mock_upstream):
    """Issue 13 on this transport: every turn's upstream call carries ``x-monogate-hop`` with the
    gateway's id after the ids the handshake brought, and a handshake that already went through
    this gateway (a channel pointing back at it) is refused before any turn goes upstream."""
    from gateway.proxy.loopguard import HOP_HEADER

    make_route("chat_completion", "e2e-ws-hop", mock_upstream.base_url("chat_completion"))
    _, secret = make_key()
    gateway.wait_config()
    mock_upstream.clear()
    url = gateway.url.replace("http://", "ws://") + "/v1/responses"
    with connect(
        url, additional_headers={"authorization": f"Bearer {secret}", HOP_HEADER: "mg-before-us"}
    ) as ws:
        for text in ("one", "two"):
            ws.send(orjson.dumps({"type": "response.create", "model": "e2e-ws-hop", "input": text}).decode())
            assert _events(ws)[-1]["type"] == "response.completed"
    hops = [r["headers"].get(HOP_HEADER) for r in mock_upstream.requests()]
    assert len(hops) == 2 and hops[0] == hops[1], hops
    before, ours = hops[0].split(",")
    assert before == "mg-before-us" and ours.startswith("mg") and len(ours) > 8
    with pytest.raises(InvalidStatus):
        with connect(url, additional_headers={"authorization": f"Bearer {secret}", HOP_HEADER: ours}):
            pass
    assert len(mock_upstream.requests()) == 2


def test_a_generate_false_warm_up_stays_in_the_gateway(gateway, mock_upstream):
    """Codex opens its connection with ``generate: false`` (a pre-warm): answered with an empty
    completed response and no upstream call; a turn continuing from its id carries its input."""
    make_route("chat_completion", "e2e-ws-warm", mock_upstream.base_url("chat_completion"))
    _, secret = make_key()
    gateway.wait_config()
    mock_upstream.clear()
    url = gateway.url.replace("http://", "ws://") + "/v1/responses"
    with connect(url, additional_headers={"authorization": f"Bearer {secret}"}) as ws:
        ws.send(
            orjson.dumps(
                {
                    "type": "response.create",
                    "model": "e2e-ws-warm",
                    "generate": False,
                    "input": [
                        {
                            "type": "message",
                            "role": "developer",
                            "content": [{"type": "input_text", "text": "be brief"}],
                        }
                    ],
                }
            ).decode()
        )
        warm = _events(ws)
        assert [e["type"] for e in warm] == ["response.created", "response.completed"]
        assert warm[-1]["response"]["output"] == [] and warm[-1]["response"]["status"] == "completed"
        assert mock_upstream.requests() == []
        ws.send(
            orjson.dumps(
                {
                    "type": "response.create",
                    "model": "e2e-ws-warm",
                    "input": "hello",
                    "previous_response_id": warm[-1]["response"]["id"],
                }
            ).decode()
        )
        assert _events(ws)[-1]["response"]["output"][-1]["content"][0]["text"] == "Echo: hello"
    sent = mock_upstream.requests()
    assert len(sent) == 1
    assert [m["role"] for m in sent[0]["body"]["messages"]] == [
        "developer",
        "user",
    ]  # the warm-up input, then the turn
