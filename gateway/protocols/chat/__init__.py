"""The OpenAI Chat Completions codec (client and upstream protocol ``chat_completion``).

The work lives in ``request`` and ``response`` (whole bodies), ``decode`` / ``encode`` (the
field-level mapping they share: parts, messages, tools), ``stream_decode`` / ``stream_encode``
(SSE) and ``common`` (internal keys, finish reasons, usage); this package's ``__init__`` is the
contract surface the proxy and the other codecs import (see ``gateway.protocols.contracts``).

Where the reference implementation has a quirk a user would not want, this codec does what a
user expects instead:

- An unknown message role is a 400 naming the field (the reference silently treats it as user).
- A URP finish reason ``other`` becomes the native Chat reason when one was kept, else ``stop``
  (the reference sends ``error``, which SDK enums do not know).
- ``stream_options`` is dropped from non-stream upstream requests (OpenAI rejects it there);
  ``stream=true`` always forces ``include_usage=true``.
- Effort ``max`` becomes ``xhigh`` for non-DeepSeek Chat upstreams (the highest OpenAI value).
- Unknown parts inside a tool message become ProviderItemNodes (replayed to Chat only) rather
  than text holding their JSON: nothing is ever stringified into prompt text.
- Another family's node, envelope and top-level response extras are not replayed into Chat
  responses; same-Chat hops replay everything.
- A raw ``reasoning_details`` entry is replayed only while the node still matches it, so a
  transform that rewrote the reasoning is not silently undone.
"""

from __future__ import annotations

from .common import PROTOCOL, default_error_type
from .request import decode_request, encode_request
from .response import decode_response, encode_response
from .stream_decode import StreamDecoder
from .stream_encode import StreamEncoder


def error_body(
    status: int, code: str, message: str, *, param: str | None = None, error_type: str | None = None
) -> dict:
    """OpenAI error envelope (reference §6.2)."""
    return {
        "error": {
            "message": message,
            "type": error_type or default_error_type(status),
            "param": param,
            "code": code,
        }
    }


def upstream_path(model: str, stream: bool) -> str:
    return "/v1/chat/completions"


def upstream_headers(api_key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key}", "Content-Type": "application/json"}


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
