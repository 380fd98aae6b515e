"""SDK acceptance: the official ``openai`` SDK must reconstruct what our Responses encoders write.

The SDK talks to an ``httpx.MockTransport`` that answers with our encoder's bytes, so these
tests exercise exactly what a real client parses (no network)."""

from __future__ import annotations

import httpx
import openai
import orjson
import pytest

from gateway.protocols import responses
from gateway.protocols.base import EncodeContext
from gateway.urp import events as ev
from gateway.urp.nodes import ReasoningNode, TextNode, ToolCallNode
from gateway.urp.request import Response, Usage

from .test_responses_fixtures import FINAL_OUTPUT, PATCH, _resp, decode_bytes, sse, upstream_events

TOOLS = [
    {"type": "function", "name": "get_weather", "parameters": {"type": "object", "properties": {}}},
    {"type": "function", "name": "get_time", "parameters": {"type": "object", "properties": {}}},
    {
        "type": "custom",
        "name": "apply_patch",
        "description": "patch",
        "format": {"type": "grammar", "syntax": "lark", "definition": "start: /.+/s"},
    },
]


def _cross_protocol_events() -> list[ev.Event]:
    """What a Chat/Messages upstream decodes to: interleaved deltas, NodeDone at the end."""
    nodes = [
        ReasoningNode(summary="Plan the work"),
        TextNode(role="assistant", content="Hello world"),
        ToolCallNode(call_id="call_1", name="get_weather", arguments='{"city":"Paris"}'),
        ToolCallNode(call_id="call_2", name="get_time", arguments='{"tz":"CET"}'),
        ToolCallNode(call_id="call_3", name="apply_patch", arguments=PATCH, tool_type="custom"),
    ]
    out: list[ev.Event] = [ev.ResponseStart(id="msg_01XYZ", model="claude")]
    out += [
        ev.NodeStart(index=0, node=ReasoningNode()),
        ev.NodeDelta(index=0, kind=ev.REASONING_SUMMARY, delta="Plan the work"),
        ev.NodeStart(index=1, node=TextNode(role="assistant")),
        ev.NodeDelta(index=1, kind=ev.TEXT, delta="Hello"),
        ev.NodeDelta(index=1, kind=ev.TEXT, delta=" world"),
        ev.NodeStart(index=2, node=ToolCallNode(call_id="call_1", name="get_weather")),
        ev.NodeStart(index=3, node=ToolCallNode(call_id="call_2", name="get_time")),
        ev.NodeDelta(index=2, kind=ev.ARGUMENTS, delta='{"city":'),
        ev.NodeDelta(index=3, kind=ev.ARGUMENTS, delta='{"tz":"CET"}'),
        ev.NodeDelta(index=2, kind=ev.ARGUMENTS, delta='"Paris"}'),
        ev.NodeStart(index=4, node=ToolCallNode(call_id="call_3", name="apply_patch", tool_type="custom")),
        ev.NodeDelta(index=4, kind=ev.ARGUMENTS, delta=PATCH[:10]),
        ev.NodeDelta(index=4, kind=ev.ARGUMENTS, delta=PATCH[10:]),
    ]
    out += [ev.NodeDone(index=i, node=n) for i, n in enumerate(nodes)]
    out.append(
        ev.ResponseDone(
            output=nodes,
            finish_reason="tool_calls",
            usage=Usage(input_tokens=120, output_tokens=42, cache_read_tokens=100, reasoning_tokens=16),
        )
    )
    return out


def _scenarios() -> dict[str, tuple[str, list[ev.Event]]]:
    return {
        "same_protocol": ("responses", decode_bytes(sse(upstream_events()))),
        "cross_protocol": ("messages", _cross_protocol_events()),
    }


def _client(source: str, events: list[ev.Event], seen: list[dict]) -> openai.OpenAI:
    def handler(request: httpx.Request) -> httpx.Response:
        body = orjson.loads(request.content)
        seen.append(body)
        assert request.url.path == "/v1/responses"
        ctx = EncodeContext(model=body["model"], source_protocol=source)
        if body.get("stream"):
            enc = responses.StreamEncoder(ctx)
            raw = b"".join(enc.encode(e) for e in events) + enc.close()
            return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=raw)
        done = events[-1]
        start = events[0]
        resp = Response(
            id=start.id,
            model=start.model,
            output=done.output,
            finish_reason=done.finish_reason,
            usage=done.usage,
            extra=done.extra,
        )
        return httpx.Response(200, json=responses.encode_response(resp, ctx))

    return openai.OpenAI(
        api_key="x",
        base_url="http://t/v1",
        max_retries=0,
        http_client=httpx.Client(transport=httpx.MockTransport(handler)),
    )


def _assert_final(final) -> None:
    assert final.model == "alias"
    assert final.status == "completed"
    assert final.output_text == "Hello world"
    calls = [o for o in final.output if o.type == "function_call"]
    assert [(c.call_id, c.name, c.arguments) for c in calls] == [
        ("call_1", "get_weather", '{"city":"Paris"}'),
        ("call_2", "get_time", '{"tz":"CET"}'),
    ]
    custom = [o for o in final.output if o.type == "custom_tool_call"]
    assert len(custom) == 1 and custom[0].name == "apply_patch" and custom[0].input == PATCH
    assert custom[0].call_id == "call_3"
    reasoning = [o for o in final.output if o.type == "reasoning"]
    assert reasoning[0].summary[0].text == "Plan the work"
    assert final.usage.input_tokens == 120 and final.usage.output_tokens == 42
    assert final.usage.total_tokens == 162
    assert final.usage.input_tokens_details.cached_tokens == 100
    assert final.usage.output_tokens_details.reasoning_tokens == 16


@pytest.mark.parametrize("scenario", ["same_protocol", "cross_protocol"])
def test_sdk_non_stream_create(scenario):
    source, events = _scenarios()[scenario]
    seen: list[dict] = []
    client = _client(source, events, seen)
    final = client.responses.create(model="alias", input="hi", tools=TOOLS)
    _assert_final(final)
    assert final.id.startswith("resp_")


@pytest.mark.parametrize("scenario", ["same_protocol", "cross_protocol"])
def test_sdk_stream_create(scenario):
    source, events = _scenarios()[scenario]
    client = _client(source, events, [])
    stream = client.responses.create(model="alias", input="hi", tools=TOOLS, stream=True)
    received = list(stream)
    types = [e.type for e in received]
    assert types[0] == "response.created" and types[-1] == "response.completed"
    text = "".join(e.delta for e in received if e.type == "response.output_text.delta")
    assert text == "Hello world"
    custom_input = "".join(e.delta for e in received if e.type == "response.custom_tool_call_input.delta")
    assert custom_input == PATCH
    done_items = [e.item for e in received if e.type == "response.output_item.done"]
    assert [i.type for i in done_items] == [
        "reasoning",
        "message",
        "function_call",
        "function_call",
        "custom_tool_call",
    ]
    _assert_final(received[-1].response)


@pytest.mark.parametrize("scenario", ["same_protocol", "cross_protocol"])
def test_sdk_stream_helper_final_response(scenario):
    source, events = _scenarios()[scenario]
    client = _client(source, events, [])
    with client.responses.stream(model="alias", input="hi", tools=TOOLS) as stream:
        snapshots = [e.snapshot for e in stream if e.type == "response.output_text.delta"]
        final = stream.get_final_response()
    assert snapshots[-1] == "Hello world"
    _assert_final(final)


def test_sdk_sees_failed_and_incomplete_terminals():
    failed = _resp("failed")
    failed["error"] = {"code": "server_error", "message": "boom"}
    events = decode_bytes(
        sse(
            [
                {"type": "response.created", "response": _resp("in_progress")},
                {"type": "response.failed", "response": failed},
            ]
        )
    )
    client = _client("responses", events, [])
    received = list(client.responses.create(model="alias", input="hi", stream=True))
    assert received[-1].type == "response.failed"
    assert received[-1].response.error.code == "server_error" and received[-1].response.status == "failed"

    inc = _resp("incomplete", [FINAL_OUTPUT[1]])
    inc["incomplete_details"] = {"reason": "max_output_tokens"}
    events = decode_bytes(
        sse(
            [
                {"type": "response.created", "response": _resp("in_progress")},
                {"type": "response.incomplete", "response": inc},
            ]
        )
    )
    client = _client("responses", events, [])
    received = list(client.responses.create(model="alias", input="hi", stream=True))
    assert received[-1].type == "response.incomplete"
    assert received[-1].response.incomplete_details.reason == "max_output_tokens"
    assert received[-1].response.output_text == "Hello world"


def test_sdk_request_body_decodes():
    """What the SDK sends for a Codex-like call decodes and re-encodes unchanged."""
    seen: list[dict] = []
    source, events = _scenarios()["same_protocol"]
    client = _client(source, events, seen)
    client.responses.create(
        model="alias",
        instructions="be brief",
        input=[
            {"role": "developer", "content": "ctx"},
            {"type": "function_call_output", "call_id": "call_0", "output": "ok"},
        ],
        tools=TOOLS,
        reasoning={"effort": "low", "summary": "auto"},
        store=False,
        include=["reasoning.encrypted_content"],
        tool_choice="auto",
        parallel_tool_calls=True,
    )
    body = seen[0]
    req = responses.decode_request(body)
    assert responses.encode_request(req, EncodeContext(model="alias", source_protocol="responses")) == body
