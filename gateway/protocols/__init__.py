"""Wire protocol codecs. One module per protocol; each knows nothing of HTTP or the ORM.

Every module exposes the same functions (there is no Codec base class; this list is the contract):

- ``decode_request(body: dict) -> Request``          client protocols only; raises ProtocolError
- ``encode_request(req: Request, ctx: EncodeContext) -> dict``   upstream wire body
- ``decode_response(body: dict) -> Response``        raises UpstreamProtocolError
- ``encode_response(resp: Response, ctx: EncodeContext) -> dict``   client protocols only
- ``StreamDecoder()``: ``feed(event_name, data) -> list[Event]``, ``close() -> list[Event]``
- ``StreamEncoder(ctx)``: ``encode(event) -> bytes``, ``keepalive() -> bytes``,
  ``error(status, code, message) -> bytes`` (pre-stream error frames)
- ``error_body(status, code, message, *, param=None, error_type=None) -> dict``   client protocols only
- ``upstream_path(model, stream) -> str`` and ``upstream_headers(api_key) -> dict``
"""

from __future__ import annotations

from importlib import import_module
from types import ModuleType

CLIENT_PROTOCOLS = ("chat_completion", "responses", "messages")
UPSTREAM_PROTOCOLS = ("chat_completion", "responses", "messages", "gemini")

_MODULES = {
    "chat_completion": "gateway.protocols.chat_completions",
    "responses": "gateway.protocols.responses",
    "messages": "gateway.protocols.messages",
    "gemini": "gateway.protocols.gemini",
    "completions": "gateway.protocols.completions",  # legacy /v1/completions, client side only
}


def codec(protocol: str) -> ModuleType:
    """The codec module for a protocol name."""
    return import_module(_MODULES[protocol])
