"""The codec contracts as ``typing.Protocol`` classes, so a type checker (and a test) can hold
every protocol package to the same surface.

A codec is a *module* (each ``gateway.protocols.<protocol>`` package's ``__init__``), not an
object: its functions are module-level and ``StreamDecoder`` / ``StreamEncoder`` are classes the
module exports. Modules satisfy protocols structurally (PEP 544), so ``UpstreamCodec`` and
``Codec`` below list the module attributes; ``self`` in them stands for the module, and the two
classes are read-only properties (a class is a callable returning an instance).

- ``UpstreamCodec``: what the proxy needs to talk *to* an upstream in that protocol.
- ``Codec``: a client protocol also serves clients, so it adds the client half (decode the
  client's request, encode the response and stream back, shape errors).

All four protocols are both (Gemini's client half is ``gemini/client.py``); the legacy
``completions`` codec is client-only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from gateway.urp import Request, Response
from gateway.urp.events import Event

from .base import EncodeContext


@runtime_checkable
class StreamDecoder(Protocol):
    """Upstream SSE -> URP events, one SSE event at a time.

    ``feed`` takes the SSE ``event:`` name (or None) and the ``data:`` text and returns the
    events it completes; ``close`` is called at end of stream and returns the final events (an
    error event when the upstream stopped before its terminal event, never a synthesised
    success).
    """

    def feed(self, event_name: str | None, data: str) -> list[Event]: ...

    def close(self) -> list[Event]: ...


@runtime_checkable
class StreamEncoder(Protocol):
    """URP events -> client SSE bytes, incrementally (it never keeps the whole stream).

    ``keepalive`` is a frame that keeps an idle connection open; ``error`` is the frames for an
    error before or during the stream; ``close`` ends the stream (terminal frames when the
    events stopped before a ResponseDone).
    """

    def encode(self, event: Event) -> bytes: ...

    def keepalive(self) -> bytes: ...

    def error(self, status: int, code: str, message: str) -> bytes: ...

    def close(self) -> bytes: ...


_Decoder = StreamDecoder
_Encoder = StreamEncoder


@runtime_checkable
class UpstreamCodec(Protocol):
    """A protocol the gateway can send requests to (module-level surface)."""

    PROTOCOL: str

    @property
    def StreamDecoder(self) -> Callable[[], _Decoder]:  # named as the class the module exports
        """The decoder class: ``StreamDecoder()`` per upstream stream."""
        ...

    def encode_request(self, req: Request, ctx: EncodeContext) -> dict[str, Any]:
        """Request -> the upstream's wire body."""
        ...

    def decode_response(self, body: dict[str, Any]) -> Response:
        """Upstream whole-response body -> Response; raises UpstreamProtocolError."""
        ...

    def upstream_path(self, model: str, stream: bool) -> str:
        """The URL path (after the provider's base URL) for a request."""
        ...

    def upstream_headers(self, api_key: str) -> dict[str, str]:
        """Authentication and content headers for the upstream."""
        ...


@runtime_checkable
class Codec(UpstreamCodec, Protocol):
    """A client protocol: everything an upstream codec has, plus the client half."""

    @property
    def StreamEncoder(self) -> Callable[[EncodeContext], _Encoder]:  # named as the class the module exports
        """The encoder class: ``StreamEncoder(ctx)`` per client stream."""
        ...

    def decode_request(self, body: dict[str, Any]) -> Request:
        """Client request body -> Request; raises ProtocolError naming the bad field."""
        ...

    def encode_response(self, resp: Response, ctx: EncodeContext) -> dict[str, Any]:
        """Response -> the client's whole-response body."""
        ...

    def error_body(
        self, status: int, code: str, message: str, *, param: str | None = None, error_type: str | None = None
    ) -> dict[str, Any]:
        """The protocol's error envelope for a client error."""
        ...
