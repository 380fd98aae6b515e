"""The upstream HTTP client: one shared aiohttp session per worker with a keep-alive pool.

Measured on this machine (bench/quick_latency.py, see the report): aiohttp costs several times
less CPU per request than plain httpx, so the hot path uses aiohttp directly. The session is
created in lifespan startup, or lazily on first use when the server runs without lifespan.
"""

from __future__ import annotations

import asyncio

import aiohttp

from gateway.fetch import GuardedResolver, channels_unguarded, check_channel_url

TRANSPORT_ERRORS = (aiohttp.ClientError, asyncio.TimeoutError, OSError)


def join_url(base_url: str, path: str) -> str:
    """Base URL + codec path. A base ending in the path's first segment (``.../v1`` with
    ``/v1/chat/completions``, ``.../v1beta`` with ``/v1beta/models/...``) is not doubled."""
    base = base_url.rstrip("/")
    if path.startswith("/"):
        first = path[1:].split("/", 1)[0]
        if first and base.endswith("/" + first):
            path = path[len(first) + 1:]
    return base + path


class UpstreamClient:
    """Lazily created shared session. ``close()`` in lifespan shutdown."""

    def __init__(self, *, ssrf_guard: bool = False) -> None:
        self._session: aiohttp.ClientSession | None = None
        # GATEWAY_UPSTREAM_SSRF_GUARD: always refuse private/loopback upstream addresses; else the
        # global setting guard_channel_urls decides (one address check: gateway.fetch).
        self.ssrf_guard = ssrf_guard

    def _unguarded(self) -> bool:
        """The resolver's policy, consulted per resolution so a settings change applies at once."""
        return not self.ssrf_guard and channels_unguarded()

    @property
    def session(self) -> aiohttp.ClientSession:
        session = self._session
        if session is None or session.closed:
            # The guarded resolver only refuses when the operator turned guard_channel_urls on.
            connector = aiohttp.TCPConnector(limit=0, limit_per_host=0, keepalive_timeout=60,
                                             ttl_dns_cache=300, enable_cleanup_closed=False,
                                             resolver=GuardedResolver(allow=self._unguarded))
            session = self._session = aiohttp.ClientSession(
                connector=connector, auto_decompress=True, skip_auto_headers=("User-Agent",),
                timeout=aiohttp.ClientTimeout(total=None))
        return session

    async def start(self) -> None:
        _ = self.session

    async def close(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()
        self._session = None

    def post(self, url: str, body: bytes, headers: dict[str, str], *, total: float | None,
             connect: float | None, sock_read: float | None):
        """An ``async with`` context manager yielding the aiohttp response."""
        # raises AddressRefused (an OSError) when a guard refuses an IP literal host
        check_channel_url(url, force=self.ssrf_guard)
        return self.session.post(
            url, data=body, headers=headers, allow_redirects=False,
            timeout=aiohttp.ClientTimeout(total=total, connect=connect, sock_read=sock_read))
