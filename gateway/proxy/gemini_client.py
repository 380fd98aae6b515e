"""Gemini as a client protocol on the proxy (issue 19): ``POST /v1beta/models/{model}:generateContent``,
``:streamGenerateContent`` (``alt=sse``) and ``:countTokens``.

Gemini names the model and the streaming mode in the URL and authenticates with
``x-goog-api-key`` or ``?key=``; this module maps those onto what the shared pipeline expects (a
``model`` and ``stream`` in the body, an ``x-api-key`` secret), so generations then go through
``serve`` like every other client protocol (rules, routing, failover, capture), and the Gemini
codec's client half shapes the answer. ``countTokens`` answers ``{"totalTokens": N}``: a Messages
upstream's own count, else the same estimate as ``/v1/messages/count_tokens``.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import parse_qs, unquote

import orjson

from .attempt import build_attempt
from .call import Runtime
from .count_tokens import _upstream_count, estimate_tokens
from .errors import ClientError, to_client_error
from .exchange import JSON_CT, Exchange
from .routing import candidates
from .serve import decode_call
from .snapshot import KeySnap, Snapshot

GEMINI_PATH = re.compile(
    r"^/(?:v1beta|v1|v1alpha)/models/([^/:]+(?:/[^/:]+)*):"
    r"(generateContent|streamGenerateContent|countTokens)$"
)


def gemini_route(path: str) -> tuple[str, str] | None:
    """(model, method) for a Gemini path, else None."""
    match = GEMINI_PATH.match(path)
    if match is None:
        return None
    model = unquote(match.group(1))
    return (model[7:] if model.startswith("models/") else model), match.group(2)


def gemini_secret(headers: dict[str, str], query_string: bytes) -> None:
    """Make the Gemini credential (``x-goog-api-key``, else ``?key=``) the one the authenticator
    reads, unless the client sent an ``authorization`` or ``x-api-key`` header itself."""
    if "authorization" in headers or "x-api-key" in headers:
        return
    secret = headers.get("x-goog-api-key")
    if not secret and query_string:
        values = parse_qs(query_string.decode("latin-1")).get("key")
        secret = values[0] if values else None
    if secret:
        headers["x-api-key"] = secret


def gemini_body(raw_body: bytes, model: str, method: str) -> bytes:
    """The client body with the URL's model and streaming mode in it (what ``decode_request``
    reads). A ``countTokens`` body may wrap the request in ``generateContentRequest``."""
    try:
        body = orjson.loads(raw_body) if raw_body else {}
    except orjson.JSONDecodeError:
        raise ClientError(400, "invalid_request", "request body is not valid JSON") from None
    if not isinstance(body, dict):
        raise ClientError(400, "invalid_request", "request body must be a JSON object")
    if method == "countTokens" and isinstance(body.get("generateContentRequest"), dict):
        body = body["generateContentRequest"]
    body["model"] = model
    body["stream"] = method == "streamGenerateContent"
    return orjson.dumps(body)


async def serve_gemini_count(
    rt: Runtime, ex: Exchange, snapshot: Snapshot, key: KeySnap, raw_body: bytes
) -> None:
    try:
        call = decode_call(rt, ex, snapshot, key, raw_body)
        plan = candidates(snapshot, call.logical_model, rt.breaker)
        if plan is None:
            raise ClientError(404, "model_not_found", f"Model not found: {call.logical_model}")
        first = next(((route, pairs[0]) for route, pairs in plan if pairs), None)
        if first is None:
            raise ClientError(
                503, "no_healthy_upstream", f"No available upstream provider for model: {call.logical_model}"
            )
        route, (channel, upstream_model) = first
        att = build_attempt(
            call.fresh_request(),
            snapshot=snapshot,
            key=key,
            provider=route.provider,
            channel=channel,
            upstream_model=upstream_model,
            logical_model=call.logical_model,
            client_protocol=ex.protocol,
            client_stream=False,
            hop=ex.hop,
        )
        counted: Any = await _upstream_count(rt, ex, att) if channel.protocol == "messages" else None
        source = b"upstream" if counted is not None else b"estimated"
        total = counted if counted is not None else estimate_tokens(att.body)
        await ex.send_bytes(
            200,
            orjson.dumps({"totalTokens": total}),
            JSON_CT,
            extra_headers=((b"x-gateway-token-count", source),),
        )
    except Exception as exc:
        if not ex.headers_sent:
            await ex.send_error(to_client_error(exc))
