"""Wire protocol codecs. One subpackage per protocol; each knows nothing of HTTP or the ORM.

Every protocol package (``chat``, ``responses``, ``messages``, ``gemini``) has the same files:
``request`` (request bodies both ways), ``response`` (whole responses both ways),
``stream_decode`` (upstream SSE -> URP events), ``stream_encode`` (URP events -> client SSE;
client protocols only), ``common`` (the internal keys and field helpers the others share), and
an ``__init__`` that is its public face. A few packages add a module for a concern of their own:
``chat/decode`` and ``chat/encode`` (the field-level mapping request and response share),
``messages/thinking`` (thinking/effort rules), ``responses/stream_state`` (the stream encoder's
per-item records). The contract that face satisfies is
written as ``typing.Protocol`` classes in ``contracts`` (``Codec``, ``UpstreamCodec``,
``StreamDecoder``, ``StreamEncoder``). Shared plumbing: ``base`` (EncodeContext, ids, extras),
``sse``, ``json_depth``; the error types live in ``gateway.errors``.

``openai_image`` (the Images API upstream) is upstream-only and never streamed: it declares
``SUPPORTS_STREAM = False`` and provides ``wire(body) -> (bytes, content type, path)``, because
its body is multipart for edits and its path depends on the body.
"""

from __future__ import annotations

from importlib import import_module
from typing import cast

from .contracts import Codec, StreamDecoder, StreamEncoder, UpstreamCodec

CLIENT_PROTOCOLS = ("chat_completion", "responses", "messages", "gemini")
UPSTREAM_PROTOCOLS = ("chat_completion", "responses", "messages", "gemini")
# Upstreams that only make images (no text turns, never streamed): kept out of UPSTREAM_PROTOCOLS,
# which the cross-protocol text matrices and fuzzers iterate.
IMAGE_UPSTREAM_PROTOCOLS = ("openai_image",)

_MODULES = {
    "chat_completion": "gateway.protocols.chat",
    "responses": "gateway.protocols.responses",
    "messages": "gateway.protocols.messages",
    "gemini": "gateway.protocols.gemini",
    "openai_image": "gateway.protocols.openai_image",
    "completions": "gateway.protocols.completions",  # legacy /v1/completions, client side only
}

_LOADED: dict[str, Codec] = {}


def codec(protocol: str) -> Codec:
    """The codec module for a protocol name.

    Typed as the full client ``Codec``; an upstream-only protocol (``gemini``) implements only
    its ``UpstreamCodec`` part, and callers ask for the client half only for CLIENT_PROTOCOLS.
    """
    mod = _LOADED.get(protocol)
    if mod is None:  # imported on first use; then a dict lookup (called 4 times per request)
        module = import_module(_MODULES[protocol])
        # Every codec answers the two optional names (``openai_image`` sets its own): the
        # attempt reads them per request, and a module without them fails the lookup by
        # formatting an AttributeError message first (a few thousand instructions each time).
        module.__dict__.setdefault("wire", None)
        module.__dict__.setdefault("SUPPORTS_STREAM", True)
        mod = _LOADED[protocol] = cast(Codec, module)
    return mod


__all__ = [
    "CLIENT_PROTOCOLS",
    "UPSTREAM_PROTOCOLS",
    "Codec",
    "StreamDecoder",
    "StreamEncoder",
    "UpstreamCodec",
    "codec",
]
