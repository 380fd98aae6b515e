"""The proxy's start-up knobs as one plain object, so the core reads no Django settings. The
project builds it from ``settings.GATEWAY`` and ``settings.REDIS_URL`` (``gateway.wiring``)."""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from .limits import IPNetwork
from .snapshot import KeySnap

# (lower-cased request headers, the snapshot's keys by hash, unix time) -> the key, or None.
Authenticator = Callable[[Mapping[str, str], Mapping[str, KeySnap], float], KeySnap | None]


@dataclass(frozen=True, slots=True)
class ProxyConfig:
    max_body_bytes: int = 50 * 1024 * 1024
    keepalive_seconds: float = 15.0
    config_poll_seconds: float = 0.5
    breaker_failures: int = 3
    breaker_window_seconds: float = 30.0
    breaker_cooldown_seconds: float = 60.0
    breaker_rate_limit_cooldown_seconds: float = 15.0
    redis_url: str = ""  # shares breaker state and per-key limit counters between workers when set
    # proxies whose X-Forwarded-For is believed (the IP allow-list sees the client behind them)
    trusted_proxies: tuple[IPNetwork, ...] = (
        ipaddress.ip_network("127.0.0.0/8"),
        ipaddress.ip_network("::1/128"),
    )
    stream_first_byte_timeout: float = 0.0  # 0: the provider's request timeout
    stream_idle_timeout: float = 0.0  # 0: the global setting's upstream idle timeout
    stream_max_seconds: float = 1800.0  # 0: no cap
    large_body_bytes: int = 1024 * 1024  # a declared body above this is "large"
    large_body_concurrency: int = 4  # large bodies read and served at once per worker (0: no bound)
    large_body_wait_seconds: float = 30.0  # then 503
    offload_json_bytes: int = 2 * 1024 * 1024  # larger image-carrying bodies: parsed off the loop
    instance_id: str = ""  # loop guard: the deployment's hop id ("" disables the guard)
    ssrf_guard: bool = False  # refuse private/loopback upstream addresses
    # The collector's first threshold in a worker (0: Python's own, 700). See ProxyApp.startup.
    gc_gen0_threshold: int = 0
