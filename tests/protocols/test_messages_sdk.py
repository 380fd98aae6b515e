"""SDK acceptance: the bytes our Messages encoders produce, served to the official ``anthropic``
SDK through ``httpx.MockTransport``, must reconstruct text, thinking with signature, tool_use
blocks with parsed input, stop_reason and usage."""

from __future__ import annotations

from collections.abc import Callable

import anthropic
import orjson
import pytest

from gateway.protocols import messages
from gateway.protocols.base import EncodeContext
from gateway.urp import ReasoningNode, Response, TextNode, ToolCallNode, Usage
from tests.protocols.test_messages_stream import cross_family_events, encode_all, same_family_stream
from tests.sdk_http import httpx_for

httpx = httpx_for(anthropic)  # httpx2 under anthropic 2.x


def client_for(handler: Callable[[httpx.Request], httpx.Response]) -> anthropic.Anthropic:
    return anthropic.Anthropic(
        api_key="x",
        base_url="http://t",
        max_retries=0,
        http_client=httpx.Client(transport=httpx.MockTransport(handler)),
    )


def sse_response(raw: bytes) -> Callable[[httpx.Request], httpx.Response]:
    def handler(request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/v1/messages"
        body = orjson.loads(request.content)
        # what the SDK sends must decode cleanly
        messages.decode_request(body)
        return httpx.Response(200, content=raw, headers={"content-type": "text/event-stream"})

    return handler


def json_response(payload: dict) -> Callable[[httpx.Request], httpx.Response]:
    def handler(request: httpx.Request) -> httpx.Response:
        messages.decode_request(orjson.loads(request.content))
        return httpx.Response(200, json=payload)

    return handler


ASK = {
    "model": "claude-logical",
    "max_tokens": 1024,
    "messages": [{"role": "user", "content": "weather and time?"}],
}


def nonstream_body(source: str) -> dict:
    resp = Response(
        id="msg_abc",
        model="upstream-model",
        output=[
            ReasoningNode(summary="Let me think.", encrypted="sig123"),
            TextNode(role="assistant", content="Checking both."),
            ToolCallNode(call_id="toolu_1", name="get_weather", arguments='{"city": "Paris"}'),
            ToolCallNode(call_id="toolu_2", name="get_time", arguments='{"tz": "UTC"}'),
        ],
        finish_reason="tool_calls",
        usage=Usage(input_tokens=115, output_tokens=42, cache_read_tokens=100, cache_creation_tokens=5),
    )
    return messages.encode_response(resp, EncodeContext(model="claude-logical", source_protocol=source))


def assert_final(msg, *, thinking: str, signature: str, text: str, ids: tuple[str, str]) -> None:
    kinds = [b.type for b in msg.content]
    assert kinds == ["thinking", "text", "tool_use", "tool_use"]
    assert msg.content[0].thinking == thinking and msg.content[0].signature == signature
    assert msg.content[1].text == text
    assert (msg.content[2].id, msg.content[2].name, msg.content[2].input) == (
        ids[0],
        "get_weather",
        {"city": "Paris"},
    )
    assert (msg.content[3].id, msg.content[3].input) == (ids[1], {"tz": "UTC"})
    assert msg.stop_reason == "tool_use"
    assert msg.model == "claude-logical"


@pytest.mark.parametrize("source", ["messages", "chat_completion"])
def test_sdk_non_stream_create(source):
    msg = client_for(json_response(nonstream_body(source))).messages.create(**ASK)
    assert_final(
        msg, thinking="Let me think.", signature="sig123", text="Checking both.", ids=("toolu_1", "toolu_2")
    )
    assert msg.usage.input_tokens == 10  # Anthropic semantics: cache excluded
    assert msg.usage.cache_read_input_tokens == 100 and msg.usage.cache_creation_input_tokens == 5
    assert msg.usage.output_tokens == 42


def test_sdk_stream_create_iterates_raw_events():
    client = client_for(sse_response(same_family_stream()))
    events = list(client.messages.create(**ASK, stream=True))
    names = [e.type for e in events]
    assert names[0] == "message_start" and names[-2:] == ["message_delta", "message_stop"]
    deltas = [e.delta for e in events if e.type == "content_block_delta"]
    assert (
        "".join(d.partial_json for d in deltas if d.type == "input_json_delta")
        == '{"city": "Paris"}{"tz": "UTC"}'
    )
    md = [e for e in events if e.type == "message_delta"][0]
    assert md.delta.stop_reason == "tool_use" and md.usage.output_tokens == 42


def test_sdk_stream_helper_final_message_same_family():
    client = client_for(sse_response(same_family_stream()))
    with client.messages.stream(**ASK) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == "Checking both."
    assert_final(
        final, thinking="Let me think.", signature="sig123", text="Checking both.", ids=("toolu_1", "toolu_2")
    )
    assert final.usage.input_tokens == 10 and final.usage.output_tokens == 42
    assert final.usage.cache_read_input_tokens == 100


def test_sdk_stream_helper_final_message_cross_family():
    raw = encode_all(cross_family_events(), source="chat_completion")
    client = client_for(sse_response(raw))
    with client.messages.stream(**ASK) as stream:
        final = stream.get_final_message()
    assert_final(final, thinking="Plan: call tools.", signature="", text="Hello", ids=("call_a", "call_b"))
    assert final.usage.output_tokens == 20
    assert final.usage.input_tokens == 20 and final.usage.cache_read_input_tokens == 30


def test_sdk_surfaces_mid_stream_error():
    enc = messages.StreamEncoder(EncodeContext(model="claude-logical"))
    raw = enc.error(529, "overloaded_error", "Overloaded")
    client = client_for(sse_response(raw))
    with pytest.raises(anthropic.APIStatusError):
        list(client.messages.create(**ASK, stream=True))


def test_sdk_error_body_is_parsed():
    body = messages.error_body(400, "invalid_request_error", "messages[0].role: bad role")

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(400, json=body)

    with pytest.raises(anthropic.BadRequestError) as info:
        client_for(handler).messages.create(**ASK)
    assert "bad role" in str(info.value)
