"""redis-py's exception classes, imported on first use (issue 20: a worker's idle memory).

``from redis.exceptions import ...`` runs ``redis/__init__``, which imports all of redis-py (its
clients, cluster and sentinel support, and ``cryptography`` through ``redis.utils``): ~4 MB of RSS
per worker, and more with cryptography. The limiter and its pipe need the classes only where Redis
is configured, so modules refer to them as ``redis_errors.NoScriptError`` and the first such
reference (a ``RedisLimiter`` being built, or an ``except`` clause reached on a Redis path) imports
redis-py. A worker without ``REDIS_URL`` never does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from redis.exceptions import ConnectionError as RedisConnectionError
    from redis.exceptions import NoScriptError, ResponseError
    from redis.exceptions import TimeoutError as RedisTimeoutError

    __all__ = ["NoScriptError", "RedisConnectionError", "RedisTimeoutError", "ResponseError"]

_NAMES = {
    "RedisConnectionError": "ConnectionError",
    "RedisTimeoutError": "TimeoutError",
    "NoScriptError": "NoScriptError",
    "ResponseError": "ResponseError",
}


def load() -> None:
    """Import redis-py's exceptions now (what building a ``RedisLimiter`` does)."""
    for name in _NAMES:
        __getattr__(name)


def __getattr__(name: str) -> Any:
    if name not in _NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from redis import exceptions

    value = getattr(exceptions, _NAMES[name])
    globals()[name] = value
    return value
