"""The failover loop: which upstream attempts one request makes, in which order, and when it
gives up.

Providers by priority, channels in weighted order, same-channel retries for retryable failures
(with the provider's interval), then the next channel; the provider's attempt budget caps the
total. Failover is allowed until protocol data reached the client; after that a failure is the
client protocol's error event (see ``stream``)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from gateway.errors import AttemptFailed, ClientError

from . import affinity
from .attempt import Attempt, build_attempt_async
from .call import Call
from .errors import exhausted
from .routing import candidates
from .snapshot import ChannelSnap, ProviderSnap

log = logging.getLogger("gateway.proxy")

RunOne = Callable[[Call, Attempt], Awaitable[None]]


async def route(call: Call, run_one: RunOne) -> None:
    """Try attempts until one answers the client. ``run_one`` returns once the client has been
    answered or raises AttemptFailed while nothing reached the client."""
    plan = candidates(call.snapshot, call.logical_model, call.rt.breaker)
    if plan is None:
        raise ClientError(
            404, "model_not_found", f"Model not found: {call.logical_model}", error_type="not_found_error"
        )
    plan, sticky = await affinity.choose(
        call.rt.affinity, call.snapshot, call.key.id, call.logical_model, call.req, plan
    )
    last: AttemptFailed | None = None
    for route_, channels in plan:
        provider = route_.provider
        budget = provider.max_retries + 1 if provider.max_retries >= 0 else None
        used = 0
        for channel, upstream_model in channels:
            for try_no in range(provider.channel_max_retries + 1):
                if budget is not None and used >= budget:
                    break
                if try_no and provider.channel_retry_interval_ms:
                    await asyncio.sleep(provider.channel_retry_interval_ms / 1000.0)
                used += 1
                failed = await _attempt(call, run_one, provider, channel, upstream_model, sticky)
                if failed is None:
                    return
                last = failed
                if not _keep_channel(call, provider, channel, failed):
                    break
            if budget is not None and used >= budget:
                break
    raise exhausted(last, call.logical_model)


async def _attempt(
    call: Call,
    run_one: RunOne,
    provider: ProviderSnap,
    channel: ChannelSnap,
    upstream_model: str,
    sticky: affinity.Decision | None = None,
) -> AttemptFailed | None:
    """One attempt; None when it answered the client, its failure when the loop may go on.
    Rule and encoder errors (from ``build_attempt`` or the response path) propagate: they stop
    routing."""
    admission = call.admission
    if admission is not None and admission.result is not None and _reaches_out(call, provider):
        await admission.check()  # a refused request makes no fetch for its rules either
    att = await build_attempt_async(
        call.fresh_request(),
        snapshot=call.snapshot,
        key=call.key,
        provider=provider,
        channel=channel,
        upstream_model=upstream_model,
        logical_model=call.logical_model,
        client_protocol=call.ex.protocol,
        client_stream=call.client_stream,
        anthropic_beta=call.ex.anthropic_beta,
        trace=call.rec.rule_trace(),
        hop=call.ex.hop,
    )
    if sticky is not None:
        att.affinity = sticky.as_capture(provider.id, channel.id)
    if admission is not None and admission.result is not None:  # not yet known, or refused
        await admission.check()  # a refusal (ClientError) stops routing: nothing went upstream
    rec = call.rec
    rec.on_attempt_start(att)
    t = time.perf_counter()
    try:
        await run_one(call, att)
    except AttemptFailed as failed:
        rec.on_attempt_failed(att, failed, t)
        log.info(
            "attempt failed: provider=%s channel=%s status=%s code=%s %s",
            provider.name,
            channel.name,
            failed.status,
            failed.code,
            failed.detail or failed.message,
        )
        return failed
    rec.on_attempt_done(att, t)
    affinity.served(call.rt.affinity, sticky, att, responses_state=call.ex.protocol == "responses")
    return None


def _reaches_out(call: Call, provider: ProviderSnap) -> bool:
    """Whether a request rule that may apply has an async hook (an image fetch or re-encode):
    then the admission is awaited before the attempt is built, not only before it is sent."""
    chains = (provider.chain, call.snapshot.global_chain, call.key.chain)
    return any(getattr(r.transform, "apply_request_async", None) is not None for c in chains for r in c)


def _keep_channel(call: Call, provider: ProviderSnap, channel: ChannelSnap, failed: AttemptFailed) -> bool:
    """Whether the same channel may be retried: only for a retryable failure that did not open
    its circuit breaker."""
    opened = False
    if failed.retryable and provider.circuit_breaker_enabled:
        opened = call.rt.breaker.record_failure(
            channel.id,
            rate_limited=failed.rate_limited,
            threshold=provider.breaker_failures,
            window=provider.breaker_window,
            cooldown=provider.breaker_cooldown,
        )
    return failed.retryable and not opened
