"""Hand-written wire bodies for each upstream protocol (never our codecs: see the package doc).

Every module exposes ``respond(turn, ctx) -> dict``, ``stream(turn, ctx) -> Iterator[bytes]``
(complete SSE frames, one per item, so faults can count frames) and
``error_body(status, message) -> dict``.
"""

from __future__ import annotations

from dataclasses import dataclass

import orjson


@dataclass(slots=True)
class WireContext:
    model: str
    response_id: str  # a deterministic hex fragment; each protocol adds its own prefix
    created: int
    arg_chunk: int = 3
    include_usage: bool = False


def sse(data: dict | str, event: str | None = None) -> bytes:
    """One SSE frame (``event:`` line optional)."""
    payload = data if isinstance(data, str) else orjson.dumps(data).decode()
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {payload}\n\n".encode()


ERROR_TYPES_OPENAI = {
    400: "invalid_request_error",
    401: "invalid_request_error",
    403: "invalid_request_error",
    404: "invalid_request_error",
    429: "requests",
    503: "server_error",
}
ERROR_CODES_OPENAI = {401: "invalid_api_key", 404: "model_not_found", 429: "rate_limit_exceeded"}


def openai_error(status: int, message: str) -> dict:
    return {
        "error": {
            "message": message,
            "type": ERROR_TYPES_OPENAI.get(status, "server_error"),
            "param": None,
            "code": ERROR_CODES_OPENAI.get(status, "server_error" if status >= 500 else "invalid_request"),
        }
    }
