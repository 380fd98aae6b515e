"""OpenAI Chat Completions wire (``POST /v1/chat/completions``), as the public API sends it."""

from __future__ import annotations

from collections.abc import Iterator

from gateway.mock_upstream.behaviour import Turn, split_text, split_words
from gateway.mock_upstream.wire import WireContext, openai_error, sse


def error_body(status: int, message: str) -> dict:
    return openai_error(status, message)


def _usage(turn: Turn) -> dict:
    return {
        "prompt_tokens": turn.input_tokens,
        "completion_tokens": turn.output_tokens,
        "total_tokens": turn.input_tokens + turn.output_tokens,
        "prompt_tokens_details": {"cached_tokens": turn.cache_read_tokens, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": turn.reasoning_tokens,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }


def _tool_call(call, index: int | None = None) -> dict:
    out: dict = {"id": call.call_id, "type": call.kind}
    if index is not None:
        out = {"index": index, **out}
    if call.kind == "custom":
        out["custom"] = {"name": call.name, "input": call.arguments}
    else:
        out["function"] = {"name": call.name, "arguments": call.arguments}
    return out


def _reasoning_details(turn: Turn) -> list[dict]:
    # OpenRouter's shape: a readable text entry, then the opaque payload as its own entry.
    return [
        {"type": "reasoning.text", "text": turn.reasoning, "format": "unknown", "index": 0},
        {"type": "reasoning.encrypted", "data": turn.reasoning_signature, "format": "unknown", "index": 1},
    ]


def respond(turn: Turn, ctx: WireContext) -> dict:
    message: dict = {"role": "assistant", "content": turn.text or None, "refusal": None, "annotations": []}
    if turn.reasoning:
        message["reasoning"] = turn.reasoning
        message["reasoning_details"] = _reasoning_details(turn)
    if turn.tool_calls:
        message["tool_calls"] = [_tool_call(c) for c in turn.tool_calls]
    return {
        "id": f"chatcmpl-{ctx.response_id}",
        "object": "chat.completion",
        "created": ctx.created,
        "model": ctx.model,
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": turn.finish}],
        "usage": _usage(turn),
        "service_tier": "default",
        "system_fingerprint": "fp_mock",
    }


def stream(turn: Turn, ctx: WireContext) -> Iterator[bytes]:
    base = {
        "id": f"chatcmpl-{ctx.response_id}",
        "object": "chat.completion.chunk",
        "created": ctx.created,
        "model": ctx.model,
        "service_tier": "default",
        "system_fingerprint": "fp_mock",
    }
    extra = {"usage": None} if ctx.include_usage else {}

    def chunk(delta: dict, finish: str | None = None) -> bytes:
        return sse(
            {
                **base,
                "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
                **extra,
            }
        )

    yield chunk({"role": "assistant", "content": "", "refusal": None})
    if turn.reasoning:
        for piece in split_words(turn.reasoning):
            yield chunk(
                {
                    "reasoning": piece,
                    "reasoning_details": [
                        {"type": "reasoning.text", "text": piece, "format": "unknown", "index": 0}
                    ],
                }
            )
        yield chunk(
            {
                "reasoning_details": [
                    {
                        "type": "reasoning.encrypted",
                        "data": turn.reasoning_signature,
                        "format": "unknown",
                        "index": 1,
                    }
                ]
            }
        )
    if turn.text:
        for piece in split_words(turn.text):
            yield chunk({"content": piece})
    for index, call in enumerate(turn.tool_calls):
        head = _tool_call(call, index)
        if call.kind == "custom":
            head["custom"]["input"] = ""
        else:
            head["function"]["arguments"] = ""
        yield chunk({"tool_calls": [head]})
        for piece in split_text(call.arguments, ctx.arg_chunk):
            body = {"input": piece} if call.kind == "custom" else {"arguments": piece}
            yield chunk({"tool_calls": [{"index": index, call.kind: body}]})
    yield chunk({}, turn.finish)
    if ctx.include_usage:
        yield sse({**base, "choices": [], "usage": _usage(turn)})
    yield b"data: [DONE]\n\n"
