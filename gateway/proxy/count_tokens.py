"""``POST /v1/messages/count_tokens`` for Anthropic clients (Claude Code and the ``anthropic`` SDK
call it before long turns).

The request is a Messages request without ``max_tokens``; the answer is ``{"input_tokens": N}``.
Authentication, the key's redirects and allow-list and the routing are those of ``/v1/messages``
(see ``serve.decode_call`` and ``routing.candidates``). Only the first routable channel is used:

- a ``messages`` upstream gets the request after the request chains (so an injected system
  prompt counts), encoded as for a normal attempt minus ``max_tokens``/``stream``, POSTed to its
  ``/v1/messages/count_tokens``; its count is returned (``x-gateway-token-count: upstream``);
- any other upstream (or a failing Messages upstream) gets an estimate
  (``x-gateway-token-count: estimated``), see ``estimate_tokens``.

Not captured: a count is not a generation, and Claude Code sends many of them.
"""

from __future__ import annotations

import logging
import math
import time
from typing import Any

import orjson

from gateway.errors import AttemptFailed

from .attempt import build_attempt
from .call import Runtime
from .errors import ClientError, mask, to_client_error
from .exchange import JSON_CT, Exchange
from .routing import candidates
from .serve import decode_call
from .snapshot import KeySnap, Snapshot
from .upstream import TRANSPORT_ERRORS, join_url
from .whole import read_bounded

log = logging.getLogger("gateway.proxy")

COUNT_TOKENS_PATH = "/v1/messages/count_tokens"
MAX_COUNT_BODY = 64 * 1024
# The parts of an encoded upstream body that are model input, per upstream protocol's spelling.
_INPUT_FIELDS = (
    "messages",
    "system",
    "tools",
    "input",
    "instructions",
    "contents",
    "systemInstruction",
    "system_instruction",
)


def estimate_tokens(body: dict[str, Any]) -> int:
    """An estimate, not a count: ceil(compact JSON bytes of the messages, system and tools / 4).

    Chat Completions, Responses and Gemini upstreams have no count endpoint our codecs speak, and
    shipping a tokenizer per model family is out of proportion for a number Claude Code uses to
    decide when to compact. ~4 bytes per token is the usual rule of thumb for English and JSON;
    counting the request as encoded for the upstream includes what the rules injected."""
    size = 0
    for name in _INPUT_FIELDS:
        value = body.get(name)
        if value is not None:
            size += len(orjson.dumps(value))
    return math.ceil(size / 4)


async def serve_count_tokens(
    rt: Runtime, ex: Exchange, snapshot: Snapshot, key: KeySnap, raw_body: bytes
) -> None:
    """Answer one count request; every failure is a Messages-shaped error."""
    try:
        call = decode_call(rt, ex, snapshot, key, raw_body)
        plan = candidates(snapshot, call.logical_model, rt.breaker)
        if plan is None:
            raise ClientError(
                404, "model_not_found", f"Model not found: {call.logical_model}", error_type="not_found_error"
            )
        first = next(((route, pairs[0]) for route, pairs in plan if pairs), None)
        if first is None:
            raise ClientError(
                503,
                "no_healthy_upstream",
                f"No available upstream provider for model: {call.logical_model}",
                error_type="server_error",
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
            anthropic_beta=ex.anthropic_beta,
            hop=ex.hop,
        )
        counted = None
        if channel.protocol == "messages":
            counted = await _upstream_count(rt, ex, att)
        if counted is not None:
            await _answer(ex, counted, b"upstream")
        else:
            await _answer(ex, estimate_tokens(att.body), b"estimated")
    except Exception as exc:
        if not ex.headers_sent:
            await ex.send_error(to_client_error(exc))


async def _upstream_count(rt: Runtime, ex: Exchange, att) -> int | None:
    """The Messages upstream's own count, or None on any failure (the caller then estimates:
    a count request should not fail because the upstream's count endpoint did)."""
    body = dict(att.body)
    body.pop("max_tokens", None)
    body.pop("stream", None)
    headers = dict(att.headers)
    headers["accept"] = "application/json"
    path = att.codec.upstream_path(att.upstream_model, False).rstrip("/") + "/count_tokens"
    url = join_url(att.channel.base_url, path)
    t = time.perf_counter()
    try:
        async with rt.client.post(
            url,
            orjson.dumps(body),
            headers,
            total=att.total_timeout,
            connect=att.connect_timeout,
            sock_read=None,
        ) as resp:
            status = resp.status
            data = await read_bounded(resp, MAX_COUNT_BODY)
    except (AttemptFailed, *TRANSPORT_ERRORS) as exc:
        log.info(
            "count_tokens upstream failed: channel=%s %s", att.channel.name, mask(repr(exc), att.secrets)
        )
        return None
    finally:
        ex.upstream_wait += time.perf_counter() - t
    if status != 200:
        log.info("count_tokens upstream answered %s: channel=%s", status, att.channel.name)
        return None
    try:
        parsed = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    count = parsed.get("input_tokens") if isinstance(parsed, dict) else None
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        return None
    return count


async def _answer(ex: Exchange, count: int, source: bytes) -> None:
    ex.status = 200
    ex.headers_sent = True
    headers = ex.response_headers(JSON_CT)  # the usual request-id and overhead headers, plus ours
    headers.append((b"x-gateway-token-count", source))
    await ex.send({"type": "http.response.start", "status": 200, "headers": headers})
    await ex.send({"type": "http.response.body", "body": orjson.dumps({"input_tokens": count})})
    ex.finished = True
