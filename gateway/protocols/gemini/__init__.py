"""Google Gemini codec: ``generateContent`` / ``streamGenerateContent?alt=sse``, upstream and (see
``client``) client side.

Every hop into a Gemini upstream is treated as cross-family: the encoder writes
what Gemini can express (text, inline/file data, function calls and responses, thought parts
with their signatures) and skips the rest. Gemini has no tool-call ids on most models, so the
decoders synthesise stable ones, and a ``functionResponse`` names the *function* (looked up from
the call id), not the id.
"""

from __future__ import annotations

from urllib.parse import quote

from .client import StreamEncoder, decode_request, encode_response, error_body
from .common import API_VERSION, NATIVE_FINISH, PROTOCOL, SIGNATURE, WIRE_CALL_ID
from .request import SKIP_SIGNATURE, clean_schema, encode_request, thinking_config
from .response import decode_response
from .stream_decode import StreamDecoder

__all__ = [
    "StreamEncoder",
    "decode_request",
    "encode_response",
    "error_body",
    "API_VERSION",
    "NATIVE_FINISH",
    "PROTOCOL",
    "SIGNATURE",
    "SKIP_SIGNATURE",
    "StreamDecoder",
    "WIRE_CALL_ID",
    "clean_schema",
    "decode_response",
    "encode_request",
    "thinking_config",
    "upstream_headers",
    "upstream_path",
]


# -- transport ---------------------------------------------------------------------------------


def upstream_path(model: str, stream: bool) -> str:
    """``/v1beta/models/{model}:generateContent``; the model id is one percent-encoded segment
    (a leading ``models/`` is accepted and not doubled)."""
    name = model[7:] if model.startswith("models/") else model
    seg = quote(name, safe="")
    if stream:
        return f"/{API_VERSION}/models/{seg}:streamGenerateContent?alt=sse"
    return f"/{API_VERSION}/models/{seg}:generateContent"


def upstream_headers(api_key: str) -> dict[str, str]:
    return {"x-goog-api-key": api_key, "content-type": "application/json"}
