"""field_custom_tools_to_function across the real codecs: a Responses client body with a custom
``apply_patch`` tool -> decode -> request rule -> Chat encode (function tool with a string
``input``) -> Chat upstream SSE with fragmented arguments -> Chat StreamDecoder -> StreamChain with
the response rule -> Responses StreamEncoder -> the official ``openai`` SDK (httpx.MockTransport)
receives a ``custom_tool_call`` whose input is the normalised patch."""

from __future__ import annotations

import httpx
import openai
import orjson
import pytest

from gateway.protocols import chat, responses
from gateway.protocols.base import EncodeContext
from transforms.base import TransformContext
from transforms.builtin.field_custom_tools_to_function import FieldCustomToolsToFunction
from transforms.engine import CompiledRule, StreamChain, run_request, run_response, select

MODEL = "target-model"
PATCH = '*** Begin Patch ***\n*** Add File: "café".txt\nsay "hi"\n*** End Patch ***'
NORMALISED = '*** Begin Patch\n*** Add File: "café".txt\n+say "hi"\n*** End Patch\n'
BODY = {
    "model": MODEL,
    "input": "patch it",
    "tools": [
        {
            "type": "custom",
            "name": "apply_patch",
            "description": "Edit files",
            "format": {"type": "grammar", "syntax": "lark", "definition": "start: /(.|\\n)+/"},
        }
    ],
}


def chains():
    rules = (
        CompiledRule(
            1, "provider", "request", (MODEL,), FieldCustomToolsToFunction({"names": ["apply_patch"]})
        ),
        CompiledRule(
            2, "provider", "response", (MODEL,), FieldCustomToolsToFunction({"names": ["apply_patch"]})
        ),
    )
    return [rules, (), ()]


def upstream_request(stream: bool):
    body = dict(BODY, stream=stream)
    req = responses.decode_request(body)
    ctx = TransformContext(
        logical_model=MODEL, client_protocol="responses", upstream_protocol="chat_completion", stream=stream
    )
    run_request(select(chains(), "request", MODEL), req, ctx)
    wire = chat.encode_request(req, EncodeContext(model="up-model", source_protocol="responses"))
    return wire, ctx


def check_upstream_body(wire: dict) -> None:
    (tool,) = wire["tools"]
    assert tool["type"] == "function" and tool["function"]["name"] == "apply_patch"
    params = tool["function"]["parameters"]
    assert params["required"] == ["input"] and params["properties"]["input"]["type"] == "string"
    assert "format" not in tool["function"] and "custom" not in tool


def chat_sse(fragments: list[str]) -> list[str]:
    base = {"id": "chatcmpl-up", "object": "chat.completion.chunk", "created": 1, "model": "up-model"}
    chunks = [
        {
            **base,
            "choices": [
                {
                    "index": 0,
                    "delta": {
                        "role": "assistant",
                        "tool_calls": [
                            {
                                "index": 0,
                                "id": "call_1",
                                "type": "function",
                                "function": {"name": "apply_patch", "arguments": ""},
                            }
                        ],
                    },
                    "finish_reason": None,
                }
            ],
        }
    ]
    chunks += [
        {
            **base,
            "choices": [
                {
                    "index": 0,
                    "delta": {"tool_calls": [{"index": 0, "function": {"arguments": f}}]},
                    "finish_reason": None,
                }
            ],
        }
        for f in fragments
    ]
    chunks.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
    chunks.append(
        {**base, "choices": [], "usage": {"prompt_tokens": 12, "completion_tokens": 34, "total_tokens": 46}}
    )
    return [orjson.dumps(c).decode() for c in chunks] + ["[DONE]"]


def sdk_client(payload: bytes, content_type: str) -> openai.OpenAI:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=payload, headers={"content-type": content_type})

    return openai.OpenAI(
        api_key="sk-test",
        base_url="http://gw.test/v1",
        http_client=httpx.Client(transport=httpx.MockTransport(handler)),
        max_retries=0,
    )


def fragments_of(args: str, size: int) -> list[str]:
    return [args[i : i + size] for i in range(0, len(args), size)]


@pytest.mark.parametrize("size", [1, 2, 3, 5, 7, 1000])
def test_stream_through_codecs_reaches_the_sdk_as_custom_tool_call(size):
    wire, ctx = upstream_request(stream=True)
    check_upstream_body(wire)
    args = orjson.dumps({"input": PATCH}).decode().replace("é", "\\u00e9")
    decoder = chat.StreamDecoder()
    stream_chain = StreamChain(select(chains(), "response", MODEL), ctx)
    encoder = responses.StreamEncoder(EncodeContext(model=MODEL, source_protocol="chat_completion"))
    out = bytearray()
    for data in chat_sse(fragments_of(args, size)):
        for event in decoder.feed(None, data):
            for item in stream_chain.process(event):
                out += encoder.encode(item)
    for event in decoder.close():
        for item in stream_chain.process(event):
            out += encoder.encode(item)
    out += encoder.close()

    deltas, final = [], None
    with sdk_client(bytes(out), "text/event-stream").responses.create(stream=True, **BODY) as stream:
        for event in stream:
            assert event.type != "response.function_call_arguments.delta"
            if event.type == "response.custom_tool_call_input.delta":
                deltas.append(event.delta)
            elif event.type == "response.completed":
                final = event.response
    assert "".join(deltas) == NORMALISED
    assert final is not None
    (call,) = [item for item in final.output if item.type == "custom_tool_call"]
    assert call.name == "apply_patch" and call.call_id == "call_1" and call.input == NORMALISED
    assert final.model == MODEL and final.usage.output_tokens == 34


def test_non_stream_through_codecs_reaches_the_sdk_as_custom_tool_call():
    wire, ctx = upstream_request(stream=False)
    check_upstream_body(wire)
    upstream_reply = {
        "id": "chatcmpl-up",
        "object": "chat.completion",
        "created": 1,
        "model": "up-model",
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {
                                "name": "apply_patch",
                                "arguments": orjson.dumps({"input": PATCH}).decode(),
                            },
                        }
                    ],
                },
            }
        ],
        "usage": {"prompt_tokens": 12, "completion_tokens": 34, "total_tokens": 46},
    }
    resp = chat.decode_response(upstream_reply)
    run_response(select(chains(), "response", MODEL), resp, ctx)
    body = responses.encode_response(resp, EncodeContext(model=MODEL, source_protocol="chat_completion"))
    result = sdk_client(orjson.dumps(body), "application/json").responses.create(**BODY)
    (call,) = [item for item in result.output if item.type == "custom_tool_call"]
    assert call.input == NORMALISED and call.name == "apply_patch" and call.call_id == "call_1"
