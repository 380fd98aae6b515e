"""Google Gemini wire (``:generateContent`` and ``:streamGenerateContent?alt=sse``).

Thought parts carry ``thought: true`` and a ``thoughtSignature``; function calls arrive whole (Gemini
does not split arguments) and have no call id, like the public API.
"""

from __future__ import annotations

from collections.abc import Iterator

from gateway.mock_upstream.behaviour import Turn, split_words
from gateway.mock_upstream.wire import WireContext, sse

_STATUS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}


def error_body(status: int, message: str) -> dict:
    return {"error": {"code": status, "message": message, "status": _STATUS.get(status, "UNKNOWN")}}


def _usage(turn: Turn) -> dict:
    return {
        "promptTokenCount": turn.input_tokens,
        "candidatesTokenCount": turn.output_tokens - turn.reasoning_tokens,
        "totalTokenCount": turn.input_tokens + turn.output_tokens,
        **({"thoughtsTokenCount": turn.reasoning_tokens} if turn.reasoning_tokens else {}),
        "promptTokensDetails": [{"modality": "TEXT", "tokenCount": turn.input_tokens}],
    }


def _call_parts(turn: Turn) -> list[dict]:
    return [{"functionCall": {"name": c.name, "args": c.arguments_obj}} for c in turn.tool_calls]


def _chunk(
    parts: list[dict], ctx: WireContext, *, finish: str | None = None, usage: dict | None = None
) -> dict:
    candidate: dict = {"content": {"role": "model", "parts": parts}, "index": 0}
    if finish:
        candidate["finishReason"] = finish
    out: dict = {"candidates": [candidate]}
    if usage:
        out["usageMetadata"] = usage
    out["modelVersion"] = ctx.model
    out["responseId"] = ctx.response_id
    return out


def respond(turn: Turn, ctx: WireContext) -> dict:
    parts: list[dict] = []
    if turn.reasoning:
        parts.append({"text": turn.reasoning, "thought": True, "thoughtSignature": turn.reasoning_signature})
    if turn.text:
        parts.append({"text": turn.text})
    parts.extend(_call_parts(turn))
    return _chunk(parts, ctx, finish="STOP", usage=_usage(turn))


def stream(turn: Turn, ctx: WireContext) -> Iterator[bytes]:
    # Gemini SSE: data-only frames, each a whole GenerateContentResponse; usage on the last one.
    frames: list[list[dict]] = []
    if turn.reasoning:
        pieces = split_words(turn.reasoning)
        frames += [[{"text": p, "thought": True}] for p in pieces[:-1]]
        frames.append([{"text": pieces[-1], "thought": True, "thoughtSignature": turn.reasoning_signature}])
    if turn.text:
        frames += [[{"text": p}] for p in split_words(turn.text)]
    if turn.tool_calls:
        frames.append(_call_parts(turn))
    for parts in frames[:-1]:
        yield sse(
            _chunk(
                parts,
                ctx,
                usage={"promptTokenCount": turn.input_tokens, "totalTokenCount": turn.input_tokens},
            )
        )
    yield sse(_chunk(frames[-1] if frames else [{"text": ""}], ctx, finish="STOP", usage=_usage(turn)))
