"""OpenAI Responses wire (``POST /v1/responses``): the response object and the named-event stream
with ``sequence_number`` and a terminal ``response.completed`` (no ``[DONE]``, like the public API)."""

from __future__ import annotations

from collections.abc import Iterator

from gateway.mock_upstream.behaviour import Turn, short_id, split_text, split_words
from gateway.mock_upstream.wire import WireContext, openai_error, sse


def error_body(status: int, message: str) -> dict:
    return openai_error(status, message)


def _usage(turn: Turn) -> dict:
    return {
        "input_tokens": turn.input_tokens,
        "input_tokens_details": {"cached_tokens": turn.cache_read_tokens},
        "output_tokens": turn.output_tokens,
        "output_tokens_details": {"reasoning_tokens": turn.reasoning_tokens},
        "total_tokens": turn.input_tokens + turn.output_tokens,
    }


def _items(turn: Turn, ctx: WireContext) -> list[dict]:
    """The completed output items, in emission order."""
    items: list[dict] = []
    if turn.reasoning:
        items.append(
            {
                "id": f"rs_{ctx.response_id}",
                "type": "reasoning",
                "summary": [{"type": "summary_text", "text": turn.reasoning}],
                "encrypted_content": turn.reasoning_signature,
            }
        )
    if turn.text:
        items.append(
            {
                "id": f"msg_{ctx.response_id}",
                "type": "message",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": turn.text, "annotations": [], "logprobs": []}],
            }
        )
    if turn.image_b64:
        items.append(
            {
                "id": f"ig_{ctx.response_id}",
                "type": "image_generation_call",
                "status": "completed",
                "background": "opaque",
                "output_format": "png",
                "quality": "low",
                "size": "1024x1024",
                "result": turn.image_b64,
            }
        )
    for call in turn.tool_calls:
        if call.kind == "custom":
            items.append(
                {
                    "id": f"ctc_{short_id(call.call_id)}",
                    "type": "custom_tool_call",
                    "status": "completed",
                    "call_id": call.call_id,
                    "name": call.name,
                    "input": call.arguments,
                }
            )
        else:
            items.append(
                {
                    "id": f"fc_{short_id(call.call_id)}",
                    "type": "function_call",
                    "status": "completed",
                    "call_id": call.call_id,
                    "name": call.name,
                    "arguments": call.arguments,
                }
            )
    return items


def _response(turn: Turn, ctx: WireContext, *, status: str, output: list[dict], usage: dict | None) -> dict:
    return {
        "id": f"resp_{ctx.response_id}",
        "object": "response",
        "created_at": ctx.created,
        "status": status,
        "background": False,
        "completed_at": ctx.created + 1 if status == "completed" else None,
        "error": None,
        "incomplete_details": None,
        "instructions": None,
        "max_output_tokens": None,
        "model": ctx.model,
        "output": output,
        "parallel_tool_calls": True,
        "previous_response_id": None,
        "reasoning": {"effort": "medium" if turn.reasoning else None, "summary": None},
        "service_tier": "default",
        "store": False,
        "temperature": 1.0,
        "text": {"format": {"type": "text"}, "verbosity": "medium"},
        "tool_choice": "auto",
        "tools": [],
        "top_p": 1.0,
        "truncation": "disabled",
        "usage": usage,
        "user": None,
        "metadata": {},
    }


def respond(turn: Turn, ctx: WireContext) -> dict:
    return _response(turn, ctx, status="completed", output=_items(turn, ctx), usage=_usage(turn))


def _reasoning_events(event, item: dict, index: int, turn: Turn) -> Iterator[bytes]:
    item_id = item["id"]
    yield event(
        "response.output_item.added",
        {
            "output_index": index,
            "item": {
                "id": item_id,
                "type": "reasoning",
                "summary": [],
                "encrypted_content": item["encrypted_content"],
            },
        },
    )
    where = {"item_id": item_id, "output_index": index, "summary_index": 0}
    yield event(
        "response.reasoning_summary_part.added", {**where, "part": {"type": "summary_text", "text": ""}}
    )
    for piece in split_words(turn.reasoning):
        yield event("response.reasoning_summary_text.delta", {**where, "delta": piece})
    yield event("response.reasoning_summary_text.done", {**where, "text": turn.reasoning})
    yield event(
        "response.reasoning_summary_part.done",
        {**where, "part": {"type": "summary_text", "text": turn.reasoning}},
    )


def _message_events(event, item: dict, index: int, turn: Turn) -> Iterator[bytes]:
    yield event(
        "response.output_item.added",
        {
            "output_index": index,
            "item": {
                "id": item["id"],
                "type": "message",
                "status": "in_progress",
                "role": "assistant",
                "content": [],
            },
        },
    )
    empty = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
    where = {"item_id": item["id"], "output_index": index, "content_index": 0}
    yield event("response.content_part.added", {**where, "part": empty})
    for piece in split_words(turn.text):
        yield event("response.output_text.delta", {**where, "delta": piece, "logprobs": []})
    yield event("response.output_text.done", {**where, "text": turn.text, "logprobs": []})
    yield event("response.content_part.done", {**where, "part": item["content"][0]})


def _function_call_events(event, item: dict, index: int, arg_chunk: int) -> Iterator[bytes]:
    """A function_call item: added, its arguments in ``arg_chunk``-sized deltas, then done."""
    item_id = item["id"]
    yield event(
        "response.output_item.added",
        {"output_index": index, "item": {**item, "status": "in_progress", "arguments": ""}},
    )
    for piece in split_text(item["arguments"], arg_chunk):
        yield event(
            "response.function_call_arguments.delta",
            {"item_id": item_id, "output_index": index, "delta": piece},
        )
    yield event(
        "response.function_call_arguments.done",
        {
            "item_id": item_id,
            "output_index": index,
            "name": item["name"],
            "arguments": item["arguments"],
        },
    )


def stream(turn: Turn, ctx: WireContext) -> Iterator[bytes]:
    seq = 0

    def event(name: str, payload: dict) -> bytes:
        nonlocal seq
        frame = sse({"type": name, "sequence_number": seq, **payload}, name)
        seq += 1
        return frame

    start = _response(turn, ctx, status="in_progress", output=[], usage=None)
    yield event("response.created", {"response": start})
    yield event("response.in_progress", {"response": start})
    for index, item in enumerate(_items(turn, ctx)):
        item_id = item["id"]
        kind = item["type"]
        if kind == "reasoning":
            yield from _reasoning_events(event, item, index, turn)
        elif kind == "message":
            yield from _message_events(event, item, index, turn)
        elif kind == "function_call":
            yield from _function_call_events(event, item, index, ctx.arg_chunk)
        elif kind == "image_generation_call":
            yield event(
                "response.output_item.added",
                {
                    "output_index": index,
                    "item": {"id": item_id, "type": "image_generation_call", "status": "in_progress"},
                },
            )
            yield event(
                "response.image_generation_call.in_progress", {"item_id": item_id, "output_index": index}
            )
            yield event(
                "response.image_generation_call.completed", {"item_id": item_id, "output_index": index}
            )
        else:  # custom_tool_call
            yield event("response.output_item.added", {"output_index": index, "item": {**item, "input": ""}})
            for piece in split_text(item["input"], ctx.arg_chunk):
                yield event(
                    "response.custom_tool_call_input.delta",
                    {"item_id": item_id, "output_index": index, "delta": piece},
                )
            yield event(
                "response.custom_tool_call_input.done",
                {"item_id": item_id, "output_index": index, "input": item["input"]},
            )
        yield event("response.output_item.done", {"output_index": index, "item": item})
    yield event("response.completed", {"response": respond(turn, ctx)})
