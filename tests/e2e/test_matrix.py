"""The cross-protocol matrix, end to end: every client protocol (official SDK; Gemini through
``google-genai``) × every upstream protocol (the bundled mock upstream) × stream / non-stream =
32 cells, through our production
ASGI server. Each cell checks the echoed text, a full tool-call round trip (call → result → final
answer), usage, and what the upstream actually received (its own protocol and path, the upstream
model and key, the stream flag, the tool result as a native tool result, never the client's key).
"""

from __future__ import annotations

import orjson
import pytest

from gateway.mock_upstream import inbound
from tests.e2e.sdk_turns import CONVERSATIONS, TIME_ARGS, WEATHER_ARGS
from tests.servers import make_key, make_route

CLIENTS = ("chat_completion", "responses", "messages", "gemini")
UPSTREAMS = ("chat_completion", "responses", "messages", "gemini")
UPSTREAM_PATHS = {
    "chat_completion": "/v1/chat/completions",
    "responses": "/v1/responses",
    "messages": "/v1/messages",
}
PARSERS = {
    "chat_completion": inbound.from_chat,
    "responses": inbound.from_responses,
    "messages": inbound.from_messages,
}


def _auth_value(protocol: str, headers: dict[str, str]) -> str:
    if protocol == "messages":
        return headers.get("x-api-key", "")
    if protocol == "gemini":
        return headers.get("x-goog-api-key", "")
    return headers.get("authorization", "")


def _upstream_summary(protocol: str, record: dict) -> inbound.Inbound:
    if protocol == "gemini":
        stream = ":streamGenerateContent" in record["route"]
        model = record["route"].split("/models/", 1)[1].rsplit(":", 1)[0]
        return inbound.from_gemini(record["body"], model, stream)
    return PARSERS[protocol](record["body"])


def check_upstream_requests(
    records: list[dict],
    *,
    upstream: str,
    upstream_model: str,
    upstream_key: str,
    client_secret: str,
    stream: bool,
) -> list[inbound.Inbound]:
    """Assert every recorded upstream request is a clean native request of ``upstream``."""
    summaries = []
    for record in records:
        if upstream == "gemini":
            verb = "streamGenerateContent" if stream else "generateContent"
            assert record["route"] == f"/v1beta/models/{upstream_model}:{verb}", record["route"]
            if stream:
                assert "alt=sse" in record["query"]
        else:
            assert record["route"] == UPSTREAM_PATHS[upstream], record["route"]
            assert record["body"]["model"] == upstream_model
            assert bool(record["body"].get("stream")) is stream
        assert upstream_key in _auth_value(upstream, record["headers"]), "upstream key not sent"
        wire = orjson.dumps(record["headers"]) + orjson.dumps(record["body"])
        assert client_secret.encode() not in wire, "the client's API key leaked upstream"
        summaries.append(_upstream_summary(upstream, record))
    return summaries


@pytest.mark.parametrize("stream", [False, True], ids=["nonstream", "stream"])
@pytest.mark.parametrize("upstream", UPSTREAMS)
@pytest.mark.parametrize("client", CLIENTS)
def test_cell(gateway, mock_upstream, client, upstream, stream):
    model = f"e2e-{upstream}"
    upstream_model = f"up-{upstream}-model"
    route = make_route(upstream, model, mock_upstream.base_url(upstream), upstream_model=upstream_model)
    _, secret = make_key()
    gateway.wait_config()
    conversation_type = CONVERSATIONS[client]

    # 1. plain text
    chat = conversation_type(gateway.url, secret, model, stream=stream)
    text_turn = chat.ask(f"hello from {client} to {upstream}")
    assert text_turn.text == f"Echo: hello from {client} to {upstream}"
    assert text_turn.tool_calls == []
    assert text_turn.input_tokens > 0 and text_turn.output_tokens > 0
    assert text_turn.model == model  # the client sees its logical model, not the upstream's

    # 2. tool call round trip
    agent = conversation_type(gateway.url, secret, model, stream=stream, tools=("get_weather",))
    call_turn = agent.ask("please call get_weather for me")
    assert [(c.name, c.arguments) for c in call_turn.tool_calls] == [("get_weather", WEATHER_ARGS)]
    assert call_turn.tool_calls[0].call_id
    assert call_turn.finish in {"tool_calls", "tool_use", "completed"}
    assert call_turn.output_tokens > 0
    final_turn = agent.answer_tools({call_turn.tool_calls[0].call_id: "sunny and 21C"})
    assert final_turn.text == "Tool said: sunny and 21C"
    assert final_turn.tool_calls == []
    assert final_turn.input_tokens > 0 and final_turn.output_tokens > 0

    # 3. what the upstream saw
    records = mock_upstream.requests()
    assert len(records) == 3
    summaries = check_upstream_requests(
        records,
        upstream=upstream,
        upstream_model=upstream_model,
        upstream_key=route.upstream_key,
        client_secret=secret,
        stream=stream,
    )
    assert summaries[0].last_user_text == f"hello from {client} to {upstream}"
    assert [t.name for t in summaries[1].tools] == ["get_weather"]
    assert summaries[2].tool_results == ["sunny and 21C"], (
        "the tool result must reach the upstream as a tool result"
    )


@pytest.mark.parametrize("stream", [False, True], ids=["nonstream", "stream"])
@pytest.mark.parametrize("upstream", UPSTREAMS)
@pytest.mark.parametrize("client", CLIENTS)
def test_parallel_tool_calls(gateway, mock_upstream, client, upstream, stream):
    """Two parallel calls in one turn (their streamed arguments interleave by index), both results
    sent back in one turn, and the final answer sees both, in order."""
    model = f"e2e-par-{upstream}"
    make_route(upstream, model, mock_upstream.base_url(upstream), upstream_model=f"up-par-{upstream}")
    _, secret = make_key()
    gateway.wait_config()
    agent = CONVERSATIONS[client](
        gateway.url, secret, model, stream=stream, tools=("get_weather", "get_time")
    )
    turn = agent.ask("call two tools at once")
    assert [(c.name, c.arguments) for c in turn.tool_calls] == [
        ("get_weather", WEATHER_ARGS),
        ("get_time", TIME_ARGS),
    ]
    assert len({c.call_id for c in turn.tool_calls}) == 2
    final = agent.answer_tools({turn.tool_calls[0].call_id: "rain", turn.tool_calls[1].call_id: "noon"})
    assert final.text == "Tool said: rain | noon"
    last = _upstream_summary(upstream, mock_upstream.requests()[-1])
    assert last.tool_results == ["rain", "noon"]
