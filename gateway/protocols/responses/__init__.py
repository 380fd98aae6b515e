"""The OpenAI Responses codec (``/v1/responses``; provider type ``responses``).

Implements the codec contract of ``gateway.protocols.contracts``. The work is split by concern:
``common`` (items <-> nodes, shared by input and output: the shared field module), ``request``,
``response`` (object, usage, status, errors), ``stream_decode`` (upstream SSE -> events) and
``stream_encode`` (events -> client SSE, with its per-item records in ``stream_state``). This
package's ``__init__`` is the public face the proxy imports.
"""

from __future__ import annotations

from .common import PROTOCOL
from .request import decode_request, encode_request
from .response import decode_response, encode_response, error_body
from .stream_decode import StreamDecoder
from .stream_encode import StreamEncoder


def upstream_path(model: str, stream: bool) -> str:
    return "/v1/responses"


def upstream_headers(api_key: str) -> dict[str, str]:
    return {"authorization": f"Bearer {api_key}", "content-type": "application/json"}


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
