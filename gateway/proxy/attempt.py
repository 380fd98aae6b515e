"""One upstream attempt: the per-attempt request (fresh clone, upstream model, preparation,
request chains, encoding). Its failure type is ``gateway.errors.AttemptFailed``."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import orjson

from gateway.protocols import codec
from gateway.protocols.base import EncodeContext
from gateway.protocols.contracts import Codec
from gateway.proxy.prepare import prepare_after_chains, prepare_before_chains
from gateway.urp import Request

from . import envelopes
from .chain import (
    CompiledRule,
    ExecutedRule,
    RuleTrace,
    TransformContext,
    needs_whole_response,
    run_request,
    run_request_async,
    select,
)
from .loopguard import HOP_HEADER
from .secrets import secrets_of
from .snapshot import ChannelSnap, KeySnap, ProviderSnap, Snapshot
from .upstream import join_url

# What a codec's upstream_headers() uses to carry the channel key; left out for keyless channels.
CREDENTIAL_HEADERS = frozenset({"authorization", "x-api-key", "x-goog-api-key"})


@dataclass(slots=True)
class Attempt:
    provider: ProviderSnap
    channel: ChannelSnap
    upstream_model: str
    request: Request
    tctx: TransformContext
    response_rules: list[CompiledRule]
    executed: list[ExecutedRule]
    upstream_stream: bool
    body: dict[str, Any]
    raw: bytes
    url: str
    headers: dict[str, str]
    codec: Any
    total_timeout: float
    connect_timeout: float
    idle_timeout: float
    secrets: tuple[str, ...] = ()  # the channel's secrets, masked out of every upstream text
    started_at: float = field(default_factory=time.time)
    affinity: dict[str, Any] | None = None  # {"hit": sticky routing chose this channel, "key": short hash}
    response_id: str | None = None  # the upstream's response id (sticky routing binds Responses ids)
    completed: bool = False  # a whole response, or a stream that reached its terminal event cleanly


def _begin_attempt(
    req: Request,
    snapshot: Snapshot,
    key: KeySnap,
    provider: ProviderSnap,
    channel: ChannelSnap,
    upstream_model: str,
    logical_model: str,
    client_protocol: str,
    client_stream: bool,
) -> tuple[Request, TransformContext, list[tuple[CompiledRule, ...]], bool]:
    """Everything before the request chain: the upstream model, preparation, envelopes, context."""
    areq = req
    areq.model = upstream_model
    upstream_protocol = channel.protocol
    strip = (
        provider.strip_nested
        if provider.strip_nested is not None
        else snapshot.settings.strip_cross_protocol_nested
    )
    prepare_before_chains(
        areq,
        upstream_protocol=upstream_protocol,
        source_protocol=client_protocol,
        strip_nested=strip,
        extra_whitelist=provider.extra_fields_whitelist,
    )
    if key.reasoning_envelopes:  # before the request rules: they see this upstream's own payloads
        envelopes.unwrap_request(areq, upstream_protocol, upstream_model)
    chains = [provider.chain, snapshot.global_chain, key.chain]
    tctx = TransformContext(
        logical_model=logical_model,
        client_protocol=client_protocol,
        upstream_protocol=upstream_protocol,
        upstream_model=upstream_model,
        provider=provider.name,
        api_key_id=key.id,
        username=key.owner_username,
        stream=client_stream,
    )
    return areq, tctx, chains, strip


def build_attempt(
    req: Request,
    *,
    snapshot: Snapshot,
    key: KeySnap,
    provider: ProviderSnap,
    channel: ChannelSnap,
    upstream_model: str,
    logical_model: str,
    client_protocol: str,
    client_stream: bool,
    anthropic_beta: str | None = None,
    trace: RuleTrace | None = None,
    hop: str | None = None,
) -> Attempt:
    """Everything up to the bytes sent upstream. ``req`` must be this attempt's own fresh
    request (it is mutated; see ``Call.fresh_request``). Raises TransformRejected/TransformFailed
    from rules and ProtocolError from the upstream encoder: those stop routing (no fail-forward).
    ``trace`` watches the request rules one by one (captures with rule steps, the playground)."""
    areq, tctx, chains, strip = _begin_attempt(
        req, snapshot, key, provider, channel, upstream_model, logical_model, client_protocol, client_stream
    )
    executed = run_request(select(chains, "request", logical_model), areq, tctx, trace)
    return _finish_attempt(
        areq,
        tctx,
        executed,
        chains,
        snapshot=snapshot,
        key=key,
        provider=provider,
        channel=channel,
        upstream_model=upstream_model,
        logical_model=logical_model,
        client_protocol=client_protocol,
        client_stream=client_stream,
        anthropic_beta=anthropic_beta,
        strip=strip,
        hop=hop,
    )


async def build_attempt_async(
    req: Request,
    *,
    snapshot: Snapshot,
    key: KeySnap,
    provider: ProviderSnap,
    channel: ChannelSnap,
    upstream_model: str,
    logical_model: str,
    client_protocol: str,
    client_stream: bool,
    anthropic_beta: str | None = None,
    trace: RuleTrace | None = None,
    hop: str | None = None,
) -> Attempt:
    """``build_attempt`` with the request chain run by ``run_request_async``: rules with an async
    hook (image fetches and re-encodes) are awaited at their position instead of blocking."""
    areq, tctx, chains, strip = _begin_attempt(
        req, snapshot, key, provider, channel, upstream_model, logical_model, client_protocol, client_stream
    )
    rules = select(chains, "request", logical_model)
    # An empty chain has nothing to trace: no snapshot of the URP before it (a capture's
    # per-rule states are read only around rules that ran).
    executed = await run_request_async(rules, areq, tctx, trace if rules else None)
    return _finish_attempt(
        areq,
        tctx,
        executed,
        chains,
        snapshot=snapshot,
        key=key,
        provider=provider,
        channel=channel,
        upstream_model=upstream_model,
        logical_model=logical_model,
        client_protocol=client_protocol,
        client_stream=client_stream,
        anthropic_beta=anthropic_beta,
        strip=strip,
        hop=hop,
    )


def _response_rules(
    chains: list[tuple[CompiledRule, ...]],
    logical_model: str,
    key: KeySnap,
    upstream_protocol: str,
    upstream_model: str,
) -> list[CompiledRule]:
    """The response rules that apply, with the key's reasoning-envelope rule first when it has one."""
    response_rules = select(chains, "response", logical_model)
    if key.reasoning_envelopes:  # wrapping runs before every response rule
        response_rules = [envelopes.rule(upstream_protocol, upstream_model), *response_rules]
    return response_rules


def _upstream_headers(
    ucodec: Codec, channel: ChannelSnap, upstream_stream: bool, anthropic_beta: str | None
) -> dict[str, str]:
    """The upstream request's headers: ours, the channel's extras, then the codec's credentials
    (none at all for a keyless channel) and the client's anthropic-beta for a Messages upstream."""
    # Lower-cased names so a codec's "Content-Type" replaces ours instead of doubling it.
    headers = {
        "content-type": "application/json",
        "accept": "text/event-stream" if upstream_stream else "application/json",
    }
    for name, value in channel.extra_headers:
        headers[name.lower()] = value
    if channel.api_key:  # a keyless channel (a local upstream) sends no credentials at all
        for name, value in ucodec.upstream_headers(channel.api_key).items():
            headers[name.lower()] = value
    else:
        headers.update(
            (name.lower(), value)
            for name, value in ucodec.upstream_headers("").items()
            if name.lower() not in CREDENTIAL_HEADERS
        )
    if anthropic_beta and channel.protocol == "messages":
        headers["anthropic-beta"] = anthropic_beta
    return headers


def _finish_attempt(
    areq: Request,
    tctx: TransformContext,
    executed: list[ExecutedRule],
    chains: list[tuple[CompiledRule, ...]],
    *,
    snapshot: Snapshot,
    key: KeySnap,
    provider: ProviderSnap,
    channel: ChannelSnap,
    upstream_model: str,
    logical_model: str,
    client_protocol: str,
    client_stream: bool,
    anthropic_beta: str | None,
    strip: bool,
    hop: str | None = None,
) -> Attempt:
    """Everything after the request chain: response rules, stream mode, encoding, URL, headers."""
    upstream_protocol = channel.protocol
    prepare_after_chains(areq, upstream_protocol=upstream_protocol, source_protocol=client_protocol)
    response_rules = _response_rules(chains, logical_model, key, upstream_protocol, upstream_model)
    ucodec = codec(upstream_protocol)
    upstream_stream = bool(areq.stream) and getattr(ucodec, "SUPPORTS_STREAM", True)
    if upstream_stream and client_stream and response_rules and needs_whole_response(response_rules, tctx):
        upstream_stream = False
    areq.stream = upstream_stream
    model = areq.model or upstream_model  # a request rule may have rewritten it
    tctx.upstream_model = model
    body = ucodec.encode_request(
        areq, EncodeContext(model=model, source_protocol=client_protocol, strip_nested=strip)
    )
    headers = _upstream_headers(ucodec, channel, upstream_stream, anthropic_beta)
    raw = orjson.dumps(body)
    path = ucodec.upstream_path(model, upstream_stream)
    wire = getattr(ucodec, "wire", None)
    if wire is not None:  # a codec whose body decides bytes, type and path (openai_image edits: multipart)
        raw, headers["content-type"], path = wire(body)
    if hop:
        headers[HOP_HEADER] = hop  # last: a channel's extra headers cannot remove the loop guard
    settings = snapshot.settings
    return Attempt(
        provider=provider,
        channel=channel,
        upstream_model=model,
        request=areq,
        tctx=tctx,
        response_rules=response_rules,
        executed=executed,
        upstream_stream=upstream_stream,
        body=body,
        raw=raw,
        url=join_url(channel.base_url, path),
        headers=headers,
        codec=ucodec,
        total_timeout=provider.request_timeout or settings.request_timeout,
        connect_timeout=settings.connect_timeout,
        idle_timeout=settings.idle_timeout,
        secrets=secrets_of(channel),
    )
