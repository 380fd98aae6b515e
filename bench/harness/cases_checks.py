"""Gateway-only on-vs-off checks from other issues, each a paired comparison in interleaved runs:
the first system of a case is the baseline (``Case.base``), the others are the same request with
one feature switched on.

- issue 17, request logs: ``REQUEST_LOGS`` is a process knob (``GATEWAY_REQUEST_LOGS``), so "off" is a
  second gateway instance (``gateway+nolog``, same config, its own data directory) and "on" the
  main gateway (request logs are on by default). Throughput at N connections and p50 at 1.
- issue 17, per-key limits: a key with rpm/tpm/concurrency limits far above what the bench sends
  (never refused) against the plain key, on the main gateway (no Redis: each worker counts on its
  own, the fallback) and on ``gateway+redis`` (a private redis-server: one Lua admission and one
  settlement pipeline per request). The Redis instance runs with request logs off: without a
  Celery worker their rows would pile up in the broker; both keys of the pair share that set-up.
- issue 15: the five-rule chain plus the seven cache transforms limited to a model glob that
  misses, against the five-rule chain alone; and a provider with ``affinity_mode: off`` said
  explicitly (identical to the default: an A/A pair, the noise floor) and ``sticky`` against the
  plain provider.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import payloads, servers, wrk
from .cases import Case

if TYPE_CHECKING:  # pragma: no cover
    from run import Bench

CHAT = "/v1/chat/completions"


def define(b: Bench) -> None:
    plain = {"authorization": f"Bearer {servers.PLAIN_KEY}"}
    limited = {"authorization": f"Bearer {servers.LIMITS_KEY}"}

    def req(name: str, body: dict, headers: dict[str, str] = plain) -> wrk.WrkRequest:
        return wrk.WrkRequest(CHAT, b.body(name, body), headers)

    chat = req("chk-chat", payloads.chat_body("bench-chat"))
    chat_limited = req("chk-chat-limits", payloads.chat_body("bench-chat"), limited)
    b.add_variant("gateway+nolog", {"GATEWAY_REQUEST_LOGS": "false"})
    b.add_variant("gateway+redis", {"GATEWAY_REQUEST_LOGS": "false"}, redis=True)
    n = b.args.connections
    b.check_cases += [
        Case(
            f"logs-{conns}",
            f"Request logs off vs on (issue 17), {conns} conn",
            conns,
            {"gateway+nolog": chat, "gateway": chat},
            section="check",
            base="gateway+nolog",
            note="off: a second gateway with GATEWAY_REQUEST_LOGS=false; on: the main gateway (the default)",
        )
        for conns in (1, n)
    ]
    b.check_cases += [
        Case(
            "limits-1",
            "Per-key limits off vs on, no Redis (per-worker counters) (issue 17), 1 conn",
            1,
            {"gateway": chat, "gateway+limits": chat_limited},
            section="check",
            base="gateway",
            note="limits: rpm 100M, tpm 100G, concurrency 100k (never refused); without Redis each worker counts "
            "on its own",
        ),
        Case(
            "limits-redis-1",
            "Per-key limits off vs on, with Redis (issue 17), 1 conn",
            1,
            {"gateway+redis": chat, "gateway+redis+limits": chat_limited},
            section="check",
            base="gateway+redis",
            note="a gateway with REDIS_URL at a private redis-server (request logs off on it); admission is one "
            "EVALSHA on the request's path, the slot's release and the settlement one more after the answer",
        ),
        Case(
            "redis-1",
            "No Redis vs REDIS_URL set, plain key (what the limits-with-Redis pair starts from), 1 conn",
            1,
            {"gateway+nolog": chat, "gateway+redis": chat},
            section="check",
            base="gateway+nolog",
            note="both gateways with request logs off; the difference is what a configured Redis costs a request "
            "that uses no Redis feature (compare the CPU per request with the p50: a gap that is not CPU is "
            "waiting)",
        ),
        Case(
            "cache-miss-1",
            "Five-rule chain, + 7 cache transforms whose glob misses (issue 15), 1 conn",
            1,
            {
                "gateway": req("chk-chain", payloads.chain_body("bench-chain")),
                "gateway+cache-miss": req("chk-chain-cache", payloads.chain_body("bench-chain-cache")),
            },
            section="check",
            base="gateway",
            note="the seven cache_* rules are limited to models `no-such-model-*`",
        ),
        Case(
            "affinity-1",
            "Provider affinity: plain vs `affinity_mode: off` vs `sticky` (issue 15), 1 conn",
            1,
            {
                "gateway": chat,
                "gateway+affinity-off": req("chk-aff-off", payloads.chat_body("bench-affinity-off")),
                "gateway+affinity-sticky": req("chk-aff-sticky", payloads.chat_body("bench-affinity-sticky")),
            },
            section="check",
            base="gateway",
            note="off is the default of every provider, so plain vs off is an A/A pair (the noise floor); sticky "
            "binds in process memory (no Redis)",
        ),
    ]


def run_phase(b: Bench) -> None:
    """Proof that the Redis limiter was engaged: the limit counters it left in the private Redis."""
    case = next((c for c in b.check_cases if c.key == "limits-redis-1" and c.results), None)
    if case is None or b.redis is None:
        return
    import redis

    client = redis.Redis.from_url(b.redis.url)
    try:
        keys = sum(1 for _ in client.scan_iter(match="gw:limits:*", count=1000))
    finally:
        client.close()
    b.extra["limits_redis_keys"] = keys
    case.note += f"; after the runs Redis held {keys} limit counters (gw:limits:*)"
