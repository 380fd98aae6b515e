"""Lifecycle checker for an Anthropic Messages SSE stream (what Claude Code and the SDK rely on).

``check_messages_stream(raw_bytes)`` asserts the grammar and returns the parsed events as
``(event_name, payload)`` pairs (pings included). ``allow_error=True`` accepts a stream that ends
with an ``error`` event instead of ``message_delta`` + ``message_stop``.
"""

from __future__ import annotations

from typing import Any

import orjson

from gateway.protocols.sse import SSEParser

_DELTA_FOR_BLOCK = {
    "text": {"text_delta", "citations_delta"},
    "thinking": {"thinking_delta", "signature_delta"},
    "tool_use": {"input_json_delta"},
    "server_tool_use": {"input_json_delta"},
}


def parse_events(raw: bytes) -> list[tuple[str | None, Any]]:
    parser = SSEParser()
    pairs = list(parser.feed(raw)) + list(parser.close())
    events: list[tuple[str | None, Any]] = []
    for name, data in pairs:
        assert data != "[DONE]", "Messages streams never send [DONE]"
        events.append((name, orjson.loads(data)))
    return events


def check_messages_stream(raw: bytes, *, allow_error: bool = False) -> list[tuple[str, dict[str, Any]]]:
    assert b"[DONE]" not in raw, "Messages streams never send [DONE]"
    events = parse_events(raw)
    for name, payload in events:
        assert isinstance(payload, dict), f"payload of {name} is not an object"
        assert name is not None, "every frame needs an event: line"
        assert name == payload.get("type"), f"event {name!r} carries payload type {payload.get('type')!r}"
    body = [(n, p) for n, p in events if n != "ping"]
    assert body, "empty stream"
    if allow_error and body[-1][0] == "error":
        assert isinstance(body[-1][1].get("error"), dict) and body[-1][1]["error"].get("type"), (
            "error needs error.type"
        )
        if len(body) == 1:
            return events  # pre-stream error
    assert body[0][0] == "message_start", f"first event must be message_start, got {body[0][0]}"
    msg = body[0][1]["message"]
    assert msg["type"] == "message" and msg["role"] == "assistant" and msg["content"] == []
    assert isinstance(msg.get("usage"), dict)

    next_index = 0
    open_index: int | None = None
    open_type: str | None = None
    saw_signature = False
    saw_delta = saw_stop = False
    ended_with_error = False
    for pos, (name, payload) in enumerate(body[1:], start=1):
        assert not saw_stop, f"{name} after message_stop"
        if name == "error":
            assert allow_error, f"unexpected error event: {payload}"
            assert pos == len(body) - 1, "error must be the last event"
            ended_with_error = True
            break
        if name == "content_block_start":
            assert not saw_delta, "content block after message_delta"
            assert open_index is None, f"block {payload['index']} starts while block {open_index} is open"
            assert payload["index"] == next_index, f"block index {payload['index']} != expected {next_index}"
            block = payload["content_block"]
            open_index, open_type = payload["index"], block["type"]
            saw_signature = False
            if open_type == "thinking":
                assert block.get("thinking") == "" and block.get("signature") == "", "thinking starts empty"
            elif open_type == "text":
                assert block.get("text") == "", "text block starts empty"
            elif open_type == "tool_use":
                assert block.get("id") and block.get("name") and block.get("input") == {}
            next_index += 1
        elif name == "content_block_delta":
            assert payload["index"] == open_index, (
                f"delta for block {payload['index']} while {open_index} is open"
            )
            dtype = payload["delta"]["type"]
            allowed = _DELTA_FOR_BLOCK.get(open_type or "", set())
            assert dtype in allowed, f"{dtype} inside a {open_type} block"
            if open_type == "thinking":
                assert not saw_signature, f"{dtype} after signature_delta"
                saw_signature = dtype == "signature_delta"
        elif name == "content_block_stop":
            assert payload["index"] == open_index, (
                f"stop for block {payload['index']} while {open_index} is open"
            )
            open_index = open_type = None
        elif name == "message_delta":
            assert open_index is None, "message_delta while a block is open"
            assert not saw_delta, "two message_delta events"
            assert payload["delta"].get("stop_reason"), "message_delta needs a stop_reason"
            assert "stop_sequence" in payload["delta"]
            usage = payload.get("usage")
            assert isinstance(usage, dict) and isinstance(usage.get("output_tokens"), int)
            saw_delta = True
        elif name == "message_stop":
            assert saw_delta, "message_stop before message_delta"
            saw_stop = True
        else:
            raise AssertionError(f"unknown event {name}")
    if not ended_with_error:
        assert saw_stop, "stream must end with message_stop"
    return events
