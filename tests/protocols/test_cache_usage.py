"""Cache accounting matrix: cache read and write tokens decoded from each upstream protocol's
usage (stream and non-stream) and encoded into each client protocol's usage without double
counting, read back through the official SDKs.

Numbers: 30 input tokens in total (OpenAI semantics, inclusive), 15 read from cache, 4 written
to cache, 9 output. Anthropic reports ``input_tokens`` exclusive of both (11).
"""

from __future__ import annotations

from typing import Any

import anthropic
import openai
import orjson
import pytest

from gateway.protocols import codec
from gateway.protocols.base import EncodeContext

from .test_matrix import _sse, _transport, decode_stream

TOTAL_IN, READ, WRITE, OUT = 30, 15, 4, 9
TEXT = "cached hello"


def chat_reply(stream: bool) -> Any:
    usage = {
        "prompt_tokens": TOTAL_IN,
        "completion_tokens": OUT,
        "total_tokens": TOTAL_IN + OUT,
        "prompt_tokens_details": {"cached_tokens": READ, "cache_write_tokens": WRITE},
    }
    head = {"id": "c1", "object": "chat.completion", "created": 1, "model": "up"}
    if not stream:
        return {
            **head,
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": TEXT}, "finish_reason": "stop"}
            ],
            "usage": usage,
        }
    head["object"] = "chat.completion.chunk"
    return (
        _sse(
            {
                **head,
                "choices": [
                    {"index": 0, "delta": {"role": "assistant", "content": TEXT}, "finish_reason": None}
                ],
            }
        )
        + _sse({**head, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        + _sse({**head, "choices": [], "usage": usage})
        + _sse("[DONE]")
    ).encode()


def responses_reply(stream: bool) -> Any:
    usage = {
        "input_tokens": TOTAL_IN,
        "input_tokens_details": {"cached_tokens": READ, "cache_write_tokens": WRITE},
        "output_tokens": OUT,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": TOTAL_IN + OUT,
    }
    item = {
        "type": "message",
        "id": "m1",
        "status": "completed",
        "role": "assistant",
        "content": [{"type": "output_text", "text": TEXT, "annotations": []}],
    }
    final = {
        "id": "r1",
        "object": "response",
        "created_at": 1,
        "status": "completed",
        "model": "up",
        "output": [item],
        "usage": usage,
    }
    if not stream:
        return final
    start = {**final, "status": "in_progress", "output": [], "usage": None}
    return (
        _sse({"type": "response.created", "sequence_number": 1, "response": start}, "response.created")
        + _sse(
            {
                "type": "response.output_item.added",
                "sequence_number": 2,
                "output_index": 0,
                "item": {**item, "content": [], "status": "in_progress"},
            },
            "response.output_item.added",
        )
        + _sse(
            {
                "type": "response.output_text.delta",
                "sequence_number": 3,
                "item_id": "m1",
                "output_index": 0,
                "content_index": 0,
                "delta": TEXT,
                "logprobs": [],
            },
            "response.output_text.delta",
        )
        + _sse(
            {"type": "response.output_item.done", "sequence_number": 4, "output_index": 0, "item": item},
            "response.output_item.done",
        )
        + _sse({"type": "response.completed", "sequence_number": 5, "response": final}, "response.completed")
    ).encode()


def messages_reply(stream: bool, cumulative_delta: bool = False) -> Any:
    usage = {
        "input_tokens": TOTAL_IN - READ - WRITE,
        "cache_creation_input_tokens": WRITE,
        "cache_read_input_tokens": READ,
        "output_tokens": OUT,
    }
    msg = {
        "id": "msg1",
        "type": "message",
        "role": "assistant",
        "model": "up",
        "content": [{"type": "text", "text": TEXT}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": usage,
    }
    if not stream:
        return msg
    # Newer API versions repeat the (cumulative) input and cache counters in message_delta.
    delta_usage = dict(usage) if cumulative_delta else {"output_tokens": OUT}
    return (
        _sse(
            {
                "type": "message_start",
                "message": {
                    **msg,
                    "content": [],
                    "stop_reason": None,
                    "usage": {**usage, "output_tokens": 1},
                },
            },
            "message_start",
        )
        + _sse(
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
            "content_block_start",
        )
        + _sse(
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": TEXT}},
            "content_block_delta",
        )
        + _sse({"type": "content_block_stop", "index": 0}, "content_block_stop")
        + _sse(
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": delta_usage,
            },
            "message_delta",
        )
        + _sse({"type": "message_stop"}, "message_stop")
    ).encode()


def gemini_reply(stream: bool) -> Any:
    usage = {
        "promptTokenCount": TOTAL_IN,
        "cachedContentTokenCount": READ,
        "candidatesTokenCount": OUT,
        "totalTokenCount": TOTAL_IN + OUT,
    }
    body = {
        "candidates": [
            {"content": {"role": "model", "parts": [{"text": TEXT}]}, "finishReason": "STOP", "index": 0}
        ],
        "usageMetadata": usage,
        "modelVersion": "up",
        "responseId": "g1",
    }
    if not stream:
        return body
    first = {
        "candidates": [{"content": {"role": "model", "parts": [{"text": ""}]}, "index": 0}],
        "usageMetadata": {**usage, "candidatesTokenCount": 1},
        "modelVersion": "up",
        "responseId": "g1",
    }
    return (_sse(first) + _sse(body)).encode()


REPLIES = {
    "chat_completion": chat_reply,
    "responses": responses_reply,
    "messages": messages_reply,
    "gemini": gemini_reply,
}
# Gemini reports implicit-cache reads only, never writes.
WRITES = {"chat_completion": WRITE, "responses": WRITE, "messages": WRITE, "gemini": 0}


def run(client: str, upstream: str, stream: bool, reply: Any = None) -> Any:
    ccodec, ucodec = codec(client), codec(upstream)
    reply = reply if reply is not None else REPLIES[upstream](stream)
    ctx = EncodeContext(model="m", source_protocol=upstream, include_usage=True)
    if not stream:
        return ccodec.encode_response(ucodec.decode_response(reply), ctx)
    enc = ccodec.StreamEncoder(ctx)
    return b"".join(enc.encode(e) for e in decode_stream(ucodec, reply)) + enc.close()


def sdk_usage(client: str, out: Any, stream: bool) -> dict[str, int]:
    """The usage as each official SDK exposes it."""
    raw = out if stream else orjson.dumps(out)
    if client == "chat_completion":
        c = openai.OpenAI(api_key="k", base_url="http://gw/v1", http_client=_transport(raw, stream))
        args = {"model": "m", "messages": [{"role": "user", "content": "x"}]}
        if stream:
            with c.chat.completions.stream(**args, stream_options={"include_usage": True}) as s:
                u = s.get_final_completion().usage
        else:
            u = c.chat.completions.create(**args).usage
        return {
            "input": u.prompt_tokens,
            "read": u.prompt_tokens_details.cached_tokens,
            "write": getattr(u.prompt_tokens_details, "cache_write_tokens", None) or 0,
        }
    if client == "responses":
        c = openai.OpenAI(api_key="k", base_url="http://gw/v1", http_client=_transport(raw, stream))
        if stream:
            with c.responses.stream(model="m", input="x") as s:
                u = s.get_final_response().usage
        else:
            u = c.responses.create(model="m", input="x").usage
        return {
            "input": u.input_tokens,
            "read": u.input_tokens_details.cached_tokens,
            "write": getattr(u.input_tokens_details, "cache_write_tokens", None) or 0,
        }
    c = anthropic.Anthropic(api_key="k", base_url="http://gw", http_client=_transport(raw, stream, anthropic))
    args = {"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "x"}]}
    if stream:
        with c.messages.stream(**args) as s:
            u = s.get_final_message().usage
    else:
        u = c.messages.create(**args).usage
    # Anthropic's input_tokens excludes cache reads and writes: add them back to compare.
    return {
        "input": u.input_tokens + (u.cache_read_input_tokens or 0) + (u.cache_creation_input_tokens or 0),
        "read": u.cache_read_input_tokens,
        "write": u.cache_creation_input_tokens or 0,
        "exclusive_input": u.input_tokens,
    }


CELLS = [
    (c, u, s)
    for c in ("chat_completion", "responses", "messages")
    for u in ("chat_completion", "responses", "messages", "gemini")
    for s in (False, True)
]


@pytest.mark.parametrize(
    "client,upstream,stream", CELLS, ids=[f"{u}->{c}-{'stream' if s else 'json'}" for c, u, s in CELLS]
)
def test_cache_tokens_reach_every_client(client, upstream, stream):
    usage = sdk_usage(client, run(client, upstream, stream), stream)
    assert usage["input"] == TOTAL_IN, "input counted once, cache tokens included once"
    assert usage["read"] == READ
    assert usage["write"] == WRITES[upstream]
    if client == "messages":
        assert usage["exclusive_input"] == TOTAL_IN - READ - WRITES[upstream]


@pytest.mark.parametrize("client", ["chat_completion", "responses", "messages"])
def test_anthropic_cumulative_message_delta_is_not_added_twice(client):
    out = run(client, "messages", True, messages_reply(True, cumulative_delta=True))
    usage = sdk_usage(client, out, True)
    assert (usage["input"], usage["read"], usage["write"]) == (TOTAL_IN, READ, WRITE)


def test_wire_fields_by_name():
    chat = run("chat_completion", "messages", False)
    assert chat["usage"]["prompt_tokens"] == TOTAL_IN
    assert chat["usage"]["prompt_tokens_details"]["cached_tokens"] == READ
    resp = run("responses", "messages", False)
    assert resp["usage"]["input_tokens_details"]["cached_tokens"] == READ
    msg = run("messages", "chat_completion", False)
    assert (msg["usage"]["cache_read_input_tokens"], msg["usage"]["cache_creation_input_tokens"]) == (
        READ,
        WRITE,
    )
    assert msg["usage"]["input_tokens"] == TOTAL_IN - READ - WRITE
