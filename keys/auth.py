"""Client API key authentication for the proxy's hot path.

Both functions are pure: the proxy passes the request headers and its in-memory snapshot of keys
(indexed by ``gateway.crypto.hash_api_key``), so authenticating costs one HMAC and one dict
lookup, never a database query.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol, TypeVar

from gateway.crypto import hash_api_key

# Anything longer is not one of our keys; refusing it early bounds the work an attacker can cause.
MAX_SECRET_LEN = 512


class _KeyLike(Protocol):
    enabled: bool
    expires_at: float | None


T = TypeVar("T", bound=_KeyLike)


def extract_secret(headers: Mapping[str, str]) -> str | None:
    """The client's secret from ``authorization: Bearer <key>`` or ``x-api-key: <key>``.

    ``headers`` has lower-cased names. When ``authorization`` is present it wins, even when
    ``x-api-key`` is also sent; an ``authorization`` value that is not a Bearer token is refused
    (None) rather than silently falling back to ``x-api-key``, as in the reference, so a client
    never authenticates with a credential other than the one it meant to send first.
    """
    auth = headers.get("authorization")
    if auth is not None:
        scheme, _, token = auth.strip().partition(" ")
        if scheme.lower() != "bearer":
            return None
        token = token.strip()
        return token or None
    key = headers.get("x-api-key")
    if key is None:
        return None
    key = key.strip()
    return key or None


def authenticate(secret: str | None, keys_by_hash: Mapping[str, T], now: float) -> T | None:
    """The key this secret belongs to, or None.

    Unknown, disabled and expired keys all give None, so the caller answers every failure with
    the same 401 and reveals nothing about which keys exist. ``now`` is unix time; a key whose
    ``expires_at`` is at or before ``now`` has expired.
    """
    if not secret or len(secret) > MAX_SECRET_LEN:
        return None
    key = keys_by_hash.get(hash_api_key(secret))
    if key is None or not key.enabled:
        return None
    expires_at = key.expires_at
    if expires_at is not None and expires_at <= now:
        return None
    return key
