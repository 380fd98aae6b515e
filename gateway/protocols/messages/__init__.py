"""Anthropic Messages codec (client protocol and upstream protocol).

The public face of the package: ``request`` (bodies both ways), ``response`` (whole responses,
usage normalisation), ``stream_decode`` / ``stream_encode`` (SSE), ``common`` (content blocks,
usage, stop reasons shared by all of them) and ``thinking`` (thinking/effort rules).
"""

from __future__ import annotations

from .common import PROTOCOL, error_object
from .request import decode_request, encode_request
from .response import decode_response, encode_response
from .stream_decode import StreamDecoder
from .stream_encode import StreamEncoder

__all__ = [
    "PROTOCOL",
    "StreamDecoder",
    "StreamEncoder",
    "decode_request",
    "decode_response",
    "encode_request",
    "encode_response",
    "error_body",
    "upstream_headers",
    "upstream_path",
]

ANTHROPIC_VERSION = "2023-06-01"


# -- errors and transport ----------------------------------------------------------------------


def error_body(
    status: int, code: str, message: str, *, param: str | None = None, error_type: str | None = None
) -> dict:
    """Anthropic error envelope ``{"type": "error", "error": {"type", "message", "code"}}`` with one of
    Anthropic's own error types and our code beside it."""
    err = error_object(status, code, message, error_type)
    if param:
        err["param"] = param
    return {"type": "error", "error": err}


def upstream_path(model: str, stream: bool) -> str:
    return "/v1/messages"


def upstream_headers(api_key: str) -> dict[str, str]:
    """Anthropic auth: ``x-api-key`` (native) and Bearer (relays that expect it), plus the
    mandatory version header."""
    return {
        "x-api-key": api_key,
        "authorization": f"Bearer {api_key}",
        "anthropic-version": ANTHROPIC_VERSION,
        "content-type": "application/json",
    }
