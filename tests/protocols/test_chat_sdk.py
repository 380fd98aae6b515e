"""The official ``openai`` SDK accepts what our Chat encoders write (non-stream JSON and SSE):
text, two parallel tool calls and usage are reconstructed, and error chunks raise."""

from __future__ import annotations

import httpx
import openai
import orjson
import pytest

from gateway.protocols import chat as cc
from gateway.protocols.base import EncodeContext
from gateway.urp import ReasoningNode, Response, TextNode, ToolCallNode, Usage
from gateway.urp import events as ev

OUTPUT = [
    ReasoningNode(content="plan"),
    TextNode(role="assistant", content="Checking the weather."),
    ToolCallNode(call_id="call_a", name="get_weather", arguments='{"city":"Paris"}'),
    ToolCallNode(call_id="call_b", name="get_weather", arguments='{"city":"Rome"}'),
]
USAGE = Usage(input_tokens=12, output_tokens=9, cache_read_tokens=2, reasoning_tokens=1)


def client_for(body: bytes, content_type: str, seen: list) -> openai.OpenAI:
    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(orjson.loads(request.content))
        return httpx.Response(200, content=body, headers={"content-type": content_type})

    return openai.OpenAI(
        api_key="sk-test",
        base_url="http://gw.test/v1",
        http_client=httpx.Client(transport=httpx.MockTransport(handler)),
    )


def stream_bytes(include_usage: bool) -> bytes:
    enc = cc.StreamEncoder(
        EncodeContext(model="logical", source_protocol="responses", include_usage=include_usage)
    )
    out = enc.encode(ev.ResponseStart(id="resp_1", model="up"))
    for i, node in enumerate(OUTPUT):
        if isinstance(node, ToolCallNode):
            out += enc.encode(ev.NodeStart(index=i, node=ToolCallNode(call_id=node.call_id, name=node.name)))
            half = len(node.arguments) // 2
            for part in (node.arguments[:half], node.arguments[half:]):
                out += enc.encode(ev.NodeDelta(index=i, kind=ev.ARGUMENTS, delta=part))
        elif isinstance(node, TextNode):
            out += enc.encode(ev.NodeStart(index=i, node=TextNode(role="assistant")))
            for word in node.content.split(" "):
                out += enc.encode(ev.NodeDelta(index=i, kind=ev.TEXT, delta=word + " "))
        else:
            out += enc.encode(ev.NodeStart(index=i, node=ReasoningNode()))
            out += enc.encode(ev.NodeDelta(index=i, kind=ev.REASONING_CONTENT, delta=node.content))
        out += enc.encode(ev.NodeDone(index=i, node=node))
    out += enc.encode(ev.ResponseDone(output=OUTPUT, finish_reason="stop", usage=USAGE))
    return out + enc.close()


def test_sdk_non_stream():
    body = cc.encode_response(
        Response(
            id="resp_1", model="up", output=OUTPUT, finish_reason="stop", usage=USAGE, created=1700000000
        ),
        EncodeContext(model="logical", source_protocol="responses"),
    )
    seen: list = []
    client = client_for(orjson.dumps(body), "application/json", seen)
    result = client.chat.completions.create(model="logical", messages=[{"role": "user", "content": "hi"}])
    choice = result.choices[0]
    assert result.model == "logical"
    assert choice.message.content == "Checking the weather."
    assert choice.finish_reason == "tool_calls"
    calls = choice.message.tool_calls
    assert [(c.id, c.function.name, c.function.arguments) for c in calls] == [
        ("call_a", "get_weather", '{"city":"Paris"}'),
        ("call_b", "get_weather", '{"city":"Rome"}'),
    ]
    assert result.usage.prompt_tokens == 12 and result.usage.completion_tokens == 9
    assert result.usage.total_tokens == 21
    assert result.usage.prompt_tokens_details.cached_tokens == 2
    assert result.usage.completion_tokens_details.reasoning_tokens == 1
    assert seen[0]["model"] == "logical"


def test_sdk_stream_reconstructs_text_parallel_calls_and_usage():
    seen: list = []
    client = client_for(stream_bytes(include_usage=True), "text/event-stream", seen)
    stream = client.chat.completions.create(
        model="logical",
        messages=[{"role": "user", "content": "hi"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    text, calls, usage, finish = "", {}, None, None
    for chunk in stream:
        assert chunk.model == "logical"
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            text += choice.delta.content or ""
            for tc in choice.delta.tool_calls or []:
                slot = calls.setdefault(tc.index, {"id": tc.id, "name": "", "arguments": ""})
                if tc.function.name:
                    slot["name"] += tc.function.name
                slot["arguments"] += tc.function.arguments or ""
            finish = choice.finish_reason or finish
    assert text.strip() == "Checking the weather."
    assert [calls[i] for i in sorted(calls)] == [
        {"id": "call_a", "name": "get_weather", "arguments": '{"city":"Paris"}'},
        {"id": "call_b", "name": "get_weather", "arguments": '{"city":"Rome"}'},
    ]
    assert finish == "tool_calls"
    assert usage.prompt_tokens == 12 and usage.completion_tokens == 9 and usage.total_tokens == 21


def test_sdk_stream_helper_accumulates():
    seen: list = []
    client = client_for(stream_bytes(include_usage=True), "text/event-stream", seen)
    with client.chat.completions.stream(model="logical", messages=[{"role": "user", "content": "hi"}]) as s:
        final = s.get_final_completion()
    msg = final.choices[0].message
    assert msg.content.strip() == "Checking the weather."
    assert [c.function.arguments for c in msg.tool_calls] == ['{"city":"Paris"}', '{"city":"Rome"}']
    assert final.usage.total_tokens == 21


def test_sdk_raises_on_error_chunk():
    enc = cc.StreamEncoder(EncodeContext(model="logical"))
    raw = enc.error(502, "upstream_error", "All upstream attempts failed")
    client = client_for(raw, "text/event-stream", [])
    stream = client.chat.completions.create(
        model="logical", messages=[{"role": "user", "content": "hi"}], stream=True
    )
    with pytest.raises(openai.APIError) as exc:
        list(stream)
    assert "All upstream attempts failed" in str(exc.value)
