"""Active health probes: every enabled channel is checked with one minimal request (the same
check as the admin's "Test channel" action, ``gateway.channel_check``) on a Celery beat
schedule. Results feed the proxy's circuit breaker through the Redis map the workers already
share (``gateway.proxy.breaker.RedisMirror``: a failed probe opens the channel for the
cooldown when its provider has the breaker on, a passing probe closes it) and are kept in
Redis for the admin's channel list.

Needs ``REDIS_URL`` (the breaker is only shared through Redis, and beat only runs with a
broker); ``GATEWAY_HEALTH_PROBE_SECONDS`` > 0 turns the schedule on."""

from __future__ import annotations

import time
from typing import Any

import orjson

from gateway.proxy.breaker import RedisMirror

HEALTH_KEY = "gateway:health"  # hash: channel id -> JSON of the last probe


def _redis(url: str | None = None) -> Any:
    import redis
    from django.conf import settings

    url = url or settings.REDIS_URL
    if not url:
        return None
    return redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2)


def probe_all(redis_url: str | None = None, timeout: float = 30.0) -> list[dict[str, Any]]:
    """Probe every enabled channel of every enabled provider for its first model; record the
    results and feed the breaker. Returns the results."""
    from gateway.channel_check import run_checks
    from gateway.conf import gateway_settings
    from providers.models import Channel

    channels = [
        ch
        for ch in Channel.objects.filter(enabled=True, provider__enabled=True)
        .select_related("provider")
        .prefetch_related("models")
        .order_by("id")
        if ch.models.all()
    ]
    results = run_checks([(ch, ch.models.all()[0].model) for ch in channels], timeout=timeout)
    client = _redis(redis_url)
    if client is None:
        return results
    now = time.time()
    cooldown = float(gateway_settings.BREAKER_COOLDOWN_SECONDS)
    by_id = {ch.pk: ch for ch in channels}
    pipe = client.pipeline(transaction=False)
    for result in results:
        cid = result["channel_id"]
        result["checked_at"] = now
        pipe.hset(HEALTH_KEY, str(cid), orjson.dumps(result))
        if not by_id[cid].provider.circuit_breaker_enabled:
            continue
        if result["ok"]:
            pipe.hdel(RedisMirror.OPEN_KEY, str(cid))
        else:
            pipe.hset(RedisMirror.OPEN_KEY, str(cid), str(now + cooldown))
    pipe.execute()
    return results


def last_results(redis_url: str | None = None) -> dict[int, dict[str, Any]]:
    """Channel id -> the last probe's result (empty without Redis or when it is unreachable)."""
    try:
        client = _redis(redis_url)
        if client is None:
            return {}
        raw = client.hgetall(HEALTH_KEY)
    except Exception:
        return {}
    return {int(k): orjson.loads(v) for k, v in raw.items()}
