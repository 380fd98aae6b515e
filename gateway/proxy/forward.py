"""JSON forwarding endpoints that are not generations: ``POST /v1/embeddings`` and
``POST /v1/responses/compact`` (reference protocols.md §6.1).

No URP, no rule chains, no capture: the client body is forwarded with only ``model`` rewritten
to the channel's upstream model, routed like a generation (the key's redirects and allow-list,
providers by priority, channels in weighted order, the breaker) with one attempt per channel
and failover on retryable failures. Errors are the client protocol's shape and follow the same
exhaustion rule as generations (``failure.exhausted``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import orjson

from gateway.errors import AttemptFailed
from gateway.protocols import codec

from .errors import ClientError, describe_upstream_error, is_retryable_status
from .exchange import Exchange
from .failure import exhausted, retry_after_value
from .loopguard import HOP_HEADER
from .routing import candidates, model_allowed, resolve_logical_model
from .snapshot import ChannelSnap, KeySnap, Snapshot
from .upstream import TRANSPORT_ERRORS, join_url
from .usage_tap import UsageTap
from .whole import read_bounded

log = logging.getLogger("gateway.proxy")

MAX_FORWARD_RESPONSE = 64 * 1024 * 1024


@dataclass(slots=True)
class Upstream:
    """One channel's call: where to POST what, and how to turn a 200 answer into the client's."""

    url: str
    body: dict[str, Any]
    headers: dict[str, str]
    translate: Callable[[dict[str, Any]], dict[str, Any]]


# (channel, upstream model, logical model) -> Upstream, or None when the channel cannot serve it
Planner = Callable[[ChannelSnap, str, str], "Upstream | None"]


def parse_body(raw_body: bytes) -> dict[str, Any]:
    try:
        body = orjson.loads(raw_body)
    except orjson.JSONDecodeError:
        raise ClientError(400, "invalid_request", "request body is not valid JSON") from None
    if not isinstance(body, dict):
        raise ClientError(400, "invalid_request", "request body must be a JSON object")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise ClientError(400, "invalid_request", "model is required", param="model")
    return body


def logical_model_for(key: KeySnap, model: str, snapshot: Snapshot) -> str:
    logical = resolve_logical_model(key, model, snapshot.settings.redirects)
    if not model_allowed(key, logical):
        raise ClientError(
            403,
            "model_not_allowed",
            f"model {logical!r} is not allowed for this API key",
            error_type="permission_error",
        )
    return logical


def openai_headers(channel: ChannelSnap) -> dict[str, str]:
    """The channel's auth in its protocol's spelling plus its extra headers, JSON both ways."""
    headers = {"content-type": "application/json", "accept": "application/json"}
    for name, value in channel.extra_headers:
        headers[name.lower()] = value
    for name, value in codec(channel.protocol).upstream_headers(channel.api_key).items():
        headers[name.lower()] = value
    return headers


async def forward(
    runtime: Any,
    ex: Exchange,
    snapshot: Snapshot,
    logical: str,
    plan_call: Planner,
    *,
    unsupported: Callable[[], ClientError],
) -> dict[str, Any]:
    """Route one forwarded call and return the translated 200 answer. Raises ClientError."""
    plan = candidates(snapshot, logical, runtime.breaker)
    if plan is None:
        raise ClientError(404, "model_not_found", f"Model not found: {logical}", error_type="not_found_error")
    last: AttemptFailed | None = None
    planned_any = False
    for route, channels in plan:
        for channel, upstream_model in channels:
            call = plan_call(channel, upstream_model, logical)
            if call is None:
                continue
            planned_any = True
            try:
                answer = await _post(runtime, ex, snapshot, route.provider, channel, call)
            except AttemptFailed as failed:
                last = failed
                log.info(
                    "forward attempt failed: channel=%s status=%s %s",
                    channel.name,
                    failed.status,
                    failed.detail or failed.message,
                )
                if failed.retryable and route.provider.circuit_breaker_enabled:
                    runtime.breaker.record_failure(channel.id, rate_limited=failed.rate_limited)
                continue
            if route.provider.circuit_breaker_enabled:
                runtime.breaker.record_success(channel.id)
            if isinstance(ex.recorder, UsageTap):  # a limited key (limits.run_limited): settle this
                ex.recorder.forwarded(channel, logical, answer.get("usage"))
            return answer
    if not planned_any:
        raise unsupported()
    raise exhausted(last, logical)


async def _post(
    runtime: Any, ex: Exchange, snapshot: Snapshot, provider: Any, channel: ChannelSnap, call: Upstream
) -> dict[str, Any]:
    total = provider.request_timeout or snapshot.settings.request_timeout
    headers = call.headers
    if ex.hop:
        headers = {**headers, HOP_HEADER: ex.hop}  # last, as for generations: the loop guard
    t = time.perf_counter()
    try:
        async with runtime.client.post(
            call.url,
            orjson.dumps(call.body),
            headers,
            total=total,
            connect=snapshot.settings.connect_timeout,
            sock_read=None,
        ) as resp:
            status = resp.status
            retry_after = resp.headers.get("retry-after") if status == 429 else None
            data = await read_bounded(resp, MAX_FORWARD_RESPONSE)
    except TRANSPORT_ERRORS as exc:
        raise AttemptFailed(
            "failed to request upstream", code="upstream_error", retryable=True, detail=repr(exc)
        ) from None
    finally:
        ex.upstream_wait += time.perf_counter() - t
    if status >= 300:
        message, code, etype = describe_upstream_error(status, data, (channel.api_key,))
        raise AttemptFailed(
            message,
            status=status,
            code=code,
            error_type=etype,
            retryable=is_retryable_status(status),
            rate_limited=status == 429,
            retry_after=retry_after_value(retry_after),
        )
    try:
        body = orjson.loads(data)
    except orjson.JSONDecodeError:
        raise AttemptFailed(
            "upstream returned a body that is not JSON", code="invalid_upstream_response"
        ) from None
    if not isinstance(body, dict):
        raise AttemptFailed(
            "upstream returned a body that is not a JSON object", code="invalid_upstream_response"
        )
    try:
        return call.translate(body)
    except (KeyError, TypeError, ValueError) as exc:
        raise AttemptFailed(
            f"upstream answer has an unexpected shape: {type(exc).__name__}", code="invalid_upstream_response"
        ) from None


def upstream_url(channel: ChannelSnap, path: str) -> str:
    return join_url(channel.base_url, path)


Handler = Callable[[Any, Exchange, Snapshot, KeySnap, bytes], Awaitable[None]]
