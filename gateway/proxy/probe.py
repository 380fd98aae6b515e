"""Channel checks: one minimal request to one channel for one model, answering status,
latency and the error if any. Used by the admin's "Test channel" action.

Core module (no ORM): the project layer passes the channel and provider as snapshot objects.
The request is a one-line chat turn encoded for the channel's protocol by the same
``build_attempt`` the proxy uses, with no transform chain (the check is about the channel, not
the rules) and no failover or retry."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

import orjson

from gateway.errors import AttemptFailed, ProtocolError, UpstreamProtocolError
from gateway.protocols import codec

from .attempt import Attempt, build_attempt
from .diagnose import describe_exception, describe_failure, target
from .dryrun import NO_KEY
from .errors import status_failure
from .secrets import secrets_of
from .snapshot import ChannelSnap, ProviderSnap, SettingsSnap, Snapshot
from .upstream import TRANSPORT_ERRORS, UpstreamClient

PROMPT = "Reply with the single word: pong"
MAX_BODY = 1024 * 1024


def _blank_result(
    provider: ProviderSnap, channel: ChannelSnap, model: str, upstream_model: str
) -> dict[str, Any]:
    """The check's answer before anything is known: every key present, ``ok`` False."""
    return {
        "channel": channel.name,
        "channel_id": channel.id,
        "provider": provider.name,
        "model": model,
        "upstream_model": upstream_model,
        "target": target(channel.base_url),
        "ok": False,
        "status": None,
        "latency_ms": None,
        "error": None,
        "reply": None,
    }


def _probe_attempt(
    provider: ProviderSnap, channel: ChannelSnap, model: str, upstream_model: str, settings: SettingsSnap
) -> Attempt:
    """The one-line chat turn, encoded for the channel by ``build_attempt`` with an empty snapshot
    and no transform chain; raises ``ProtocolError`` when the protocol cannot express it."""
    req = codec("chat_completion").decode_request(
        {"model": model, "messages": [{"role": "user", "content": PROMPT}], "max_tokens": 16}
    )
    snap = Snapshot(
        version=0,
        redis_version=0,
        built_at=0.0,
        keys_by_hash={},
        providers=(),
        global_chain=(),
        settings=settings,
    )
    return build_attempt(
        req,
        snapshot=snap,
        key=NO_KEY,
        provider=replace(provider, chain=()),
        channel=channel,
        upstream_model=upstream_model,
        logical_model=model,
        client_protocol="chat_completion",
        client_stream=False,
    )


async def check_channel(
    provider: ProviderSnap,
    channel: ChannelSnap,
    model: str,
    settings: SettingsSnap,
    client: UpstreamClient | None = None,
    timeout: float | None = 30.0,
) -> dict[str, Any]:
    """``model`` is a logical model the channel serves (its upstream name is used) or any
    upstream name. Never raises; ``ok`` says whether the channel answered a valid response."""
    upstream_model = channel.models.get(model, model)
    out = _blank_result(provider, channel, model, upstream_model)
    try:
        att = _probe_attempt(provider, channel, model, upstream_model, settings)
    except ProtocolError as exc:
        out["error"] = f"cannot encode a request for {channel.protocol}: {exc.message}"
        return out
    total = min(timeout, att.total_timeout) if timeout else att.total_timeout
    own = client is None
    client = client or UpstreamClient()
    t = time.perf_counter()
    try:
        async with client.post(
            att.url, att.raw, att.headers, total=total, connect=att.connect_timeout, sock_read=None
        ) as resp:
            out["status"] = resp.status
            data = await resp.content.read(MAX_BODY)
        out["latency_ms"] = round((time.perf_counter() - t) * 1000.0, 1)
        if resp.status >= 300:
            failed = status_failure(resp.status, data, secrets_of(channel))
            excerpt = data[:300].decode("utf-8", "replace")
            if channel.api_key:
                excerpt = excerpt.replace(channel.api_key, "***")
            out["error"] = describe_failure(failed, att.url, total, att.connect_timeout, excerpt)
            return out
        try:
            response = att.codec.decode_response(orjson.loads(data))
        except (orjson.JSONDecodeError, UpstreamProtocolError, AttemptFailed, ProtocolError) as exc:
            out["error"] = (
                f"the answer could not be read as a {channel.protocol} response ({type(exc).__name__})"
            )
            return out
        texts = [getattr(node, "content", "") for node in response.output]
        out["reply"] = " ".join(t.strip() for t in texts if isinstance(t, str))[:200]
        out["ok"] = True
    except TRANSPORT_ERRORS as exc:
        out["latency_ms"] = round((time.perf_counter() - t) * 1000.0, 1)
        out["error"] = describe_exception(exc, att.url, total, att.connect_timeout)
    finally:
        if own:
            await client.close()
    return out
