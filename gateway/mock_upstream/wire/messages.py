"""Anthropic Messages wire (``POST /v1/messages``): message object and the event stream
message_start → content_block_* → message_delta → message_stop (with a ping, no ``[DONE]``)."""

from __future__ import annotations

from collections.abc import Iterator

import orjson

from gateway.mock_upstream.behaviour import Turn, split_text, split_words
from gateway.mock_upstream.wire import WireContext, sse

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}


def error_body(status: int, message: str) -> dict:
    return {
        "type": "error",
        "error": {"type": _ERROR_TYPES.get(status, "api_error"), "message": message},
        "request_id": "req_mock",
    }


def _tool_id(call_id: str) -> str:
    return "toolu_" + call_id.removeprefix("call_")


def _blocks(turn: Turn) -> list[dict]:
    blocks: list[dict] = []
    if turn.reasoning:
        blocks.append({"type": "thinking", "thinking": turn.reasoning, "signature": turn.reasoning_signature})
    if turn.text:
        blocks.append({"type": "text", "text": turn.text})
    for call in turn.tool_calls:
        blocks.append(
            {"type": "tool_use", "id": _tool_id(call.call_id), "name": call.name, "input": call.arguments_obj}
        )
    return blocks


def _stop_reason(turn: Turn) -> str:
    return "tool_use" if turn.tool_calls else "end_turn"


def _usage(turn: Turn, output_tokens: int) -> dict:
    """Anthropic's input_tokens excludes cache reads and writes."""
    return {
        "input_tokens": turn.input_tokens - turn.cache_read_tokens - turn.cache_write_tokens,
        "cache_creation_input_tokens": turn.cache_write_tokens,
        "cache_read_input_tokens": turn.cache_read_tokens,
        "output_tokens": output_tokens,
        "service_tier": "standard",
    }


def respond(turn: Turn, ctx: WireContext) -> dict:
    return {
        "id": f"msg_{ctx.response_id}",
        "type": "message",
        "role": "assistant",
        "model": ctx.model,
        "content": _blocks(turn),
        "stop_reason": _stop_reason(turn),
        "stop_sequence": None,
        "usage": _usage(turn, turn.output_tokens),
    }


def _event(name: str, payload: dict) -> bytes:
    return sse({"type": name, **payload}, name)


def _block_events(index: int, block: dict, arg_chunk: int) -> Iterator[bytes]:
    """The start and delta events of one content block (thinking, text or tool_use)."""
    kind = block["type"]
    if kind == "thinking":
        yield _event(
            "content_block_start",
            {"index": index, "content_block": {"type": "thinking", "thinking": "", "signature": ""}},
        )
        for piece in split_words(block["thinking"]):
            yield _event(
                "content_block_delta",
                {"index": index, "delta": {"type": "thinking_delta", "thinking": piece}},
            )
        yield _event(
            "content_block_delta",
            {"index": index, "delta": {"type": "signature_delta", "signature": block["signature"]}},
        )
    elif kind == "text":
        yield _event("content_block_start", {"index": index, "content_block": {"type": "text", "text": ""}})
        for piece in split_words(block["text"]):
            yield _event(
                "content_block_delta", {"index": index, "delta": {"type": "text_delta", "text": piece}}
            )
    else:
        yield _event(
            "content_block_start",
            {
                "index": index,
                "content_block": {
                    "type": "tool_use",
                    "id": block["id"],
                    "name": block["name"],
                    "input": {},
                },
            },
        )
        yield _event(
            "content_block_delta",
            {"index": index, "delta": {"type": "input_json_delta", "partial_json": ""}},
        )
        for piece in split_text(orjson.dumps(block["input"]).decode(), arg_chunk):
            yield _event(
                "content_block_delta",
                {"index": index, "delta": {"type": "input_json_delta", "partial_json": piece}},
            )


def stream(turn: Turn, ctx: WireContext) -> Iterator[bytes]:
    start = respond(turn, ctx)
    start.update(content=[], stop_reason=None, stop_sequence=None, usage=_usage(turn, 1))
    yield _event("message_start", {"message": start})
    yield _event("ping", {})
    for index, block in enumerate(_blocks(turn)):
        yield from _block_events(index, block, ctx.arg_chunk)
        yield _event("content_block_stop", {"index": index})
    yield _event(
        "message_delta",
        {
            "delta": {"stop_reason": _stop_reason(turn), "stop_sequence": None},
            "usage": {k: v for k, v in _usage(turn, turn.output_tokens).items() if k != "service_tier"},
        },
    )
    yield _event("message_stop", {})
