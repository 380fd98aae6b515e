"""The upstream HTTP client: one keep-alive pool per worker.

Two implementations behind one ``post``: the gateway's own lean HTTP/1.1 client
(``gateway.proxy.h1client``, the default) and an aiohttp session (``GATEWAY_UPSTREAM_CLIENT=
aiohttp``). Measured on this machine, aiohttp costs several times less CPU per request than plain
httpx, and the lean client less again (bench/HOTPATH.md). Both answer with the same
response interface and raise the same exception classes. The pool is created lazily on first
use in the running loop, or in lifespan startup.
"""

from __future__ import annotations

import asyncio
import functools
import socket
from collections.abc import Awaitable, Callable, Generator, Iterable
from typing import Any

import aiohttp
import yarl
from multidict import CIMultiDict

from gateway.conf import gateway_settings
from gateway.fetch import GuardedResolver, channels_unguarded, check_channel_url

from . import h1client

TRANSPORT_ERRORS = (aiohttp.ClientError, asyncio.TimeoutError, OSError)


@functools.lru_cache(maxsize=1024)  # one entry per channel and path: a few string scans per attempt saved
def join_url(base_url: str, path: str) -> str:
    """Base URL + codec path. A base ending in the path's first segment (``.../v1`` with
    ``/v1/chat/completions``, ``.../v1beta`` with ``/v1beta/models/...``) is not doubled."""
    base = base_url.rstrip("/")
    if path.startswith("/"):
        first = path[1:].split("/", 1)[0]
        if first and base.endswith("/" + first):
            path = path[len(first) + 1 :]
    return base + path


_NO_USER_AGENT = ("User-Agent",)  # the gateway sends no User-Agent of its own upstream
_SKIP_USER_AGENT: CIMultiDict[None] = CIMultiDict({"User-Agent": None})  # read-only once built


class _Request(aiohttp.ClientRequest):
    """aiohttp's request with the session's one skipped header answered from a prepared map:
    its own ``update_auto_headers`` sorts the skip list, builds a multidict of it and copies the
    request's headers on every request (about 2 us, measured). The headers sent are the same:
    the defaults (Accept, Accept-Encoding) where the caller set none, no User-Agent."""

    def update_auto_headers(self, skip_auto_headers: Iterable[str] | None) -> None:
        if skip_auto_headers is None or set(skip_auto_headers) != {"User-Agent"}:
            super().update_auto_headers(skip_auto_headers)
            return
        self._skip_auto_headers = _SKIP_USER_AGENT
        headers = self.headers
        for name, value in self.DEFAULT_HEADERS.items():
            if name not in headers:
                headers[name] = value


class UpstreamClient:
    """Lazily created shared session. ``close()`` in lifespan shutdown."""

    def __init__(self, *, ssrf_guard: bool = False, impl: str | None = None) -> None:
        self._session: aiohttp.ClientSession | None = None
        self._pool: h1client.H1Pool | None = None
        # GATEWAY_UPSTREAM_SSRF_GUARD: always refuse private/loopback upstream addresses; else the
        # global setting guard_channel_urls decides (one address check: gateway.fetch).
        self.ssrf_guard = ssrf_guard
        impl = impl or str(gateway_settings.UPSTREAM_CLIENT)
        if impl not in ("h1", "aiohttp"):
            raise ValueError(f"GATEWAY_UPSTREAM_CLIENT must be h1 or aiohttp, not {impl!r}")
        self.lean = impl == "h1"
        self._resolver: GuardedResolver | None = None
        self._dns: dict[tuple[str, int, bool], tuple[float, list[dict[str, Any]]]] = {}

    def _unguarded(self) -> bool:
        """The resolver's policy, consulted per resolution so a settings change applies at once."""
        return not self.ssrf_guard and channels_unguarded()

    @property
    def session(self) -> aiohttp.ClientSession:
        session = self._session
        if session is None or session.closed:
            # The guarded resolver only refuses when the operator turned guard_channel_urls on.
            connector = aiohttp.TCPConnector(
                limit=0,
                limit_per_host=0,
                keepalive_timeout=60,
                ttl_dns_cache=300,
                enable_cleanup_closed=False,
                resolver=GuardedResolver(allow=self._unguarded),
            )
            session = self._session = aiohttp.ClientSession(
                connector=connector,
                auto_decompress=True,
                skip_auto_headers=_NO_USER_AGENT,
                request_class=_Request,
                timeout=aiohttp.ClientTimeout(total=None),
            )
        return session

    @property
    def pool(self) -> h1client.H1Pool:
        """The lean client's pool, one per event loop (a pool's connections belong to its loop)."""
        pool = self._pool
        if pool is None or pool.loop is not asyncio.get_running_loop():
            pool = self._pool = h1client.H1Pool(self._resolve, keepalive=60)
        return pool

    async def _resolve(self, host: str, port: int) -> list[dict[str, Any]]:
        """Addresses of a host name through the guarded resolver, cached 300 s as aiohttp's
        connector did; the guard's current policy is part of the cache key."""
        loop = asyncio.get_running_loop()
        key = (host, port, self._unguarded())
        hit = self._dns.get(key)
        if hit is not None and hit[0] > loop.time():
            return hit[1]
        if self._resolver is None:
            self._resolver = GuardedResolver(allow=self._unguarded)
        infos: list[dict[str, Any]] = list(await self._resolver.resolve(host, port, family=socket.AF_UNSPEC))  # type: ignore[arg-type]
        if len(self._dns) > 1024:
            self._dns.clear()
        self._dns[key] = (loop.time() + 300.0, infos)
        return infos

    async def start(self) -> None:
        if self.lean:
            _ = self.pool
        else:
            _ = self.session

    async def close(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()
        self._session = None
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    def post(
        self,
        url: str,
        body: bytes,
        headers: dict[str, str],
        *,
        total: float | None,
        connect: float | None,
        sock_read: float | None,
    ) -> _ResendOnce | _Pending:
        """The response, awaited or as an ``async with`` context manager."""
        # raises AddressRefused (an OSError) when a guard refuses an IP literal host
        check_channel_url(url, force=self.ssrf_guard)
        if self.lean:
            return _Pending(h1client.post(self.pool, url, body, headers, total, connect, sock_read))
        return self._aiohttp_post(url, body, headers, _timeout(total, connect, sock_read))

    def _aiohttp_post(
        self, url: str, body: bytes, headers: dict[str, str], timeout: aiohttp.ClientTimeout
    ) -> _ResendOnce:
        """(Its own method so that the lean path above builds no cells for this closure.)"""
        target = _url(url)
        return _ResendOnce(
            lambda: self.session.post(
                target, data=body, headers=headers, allow_redirects=False, timeout=timeout
            )
        )


@functools.lru_cache(maxsize=256)
def _timeout(total: float | None, connect: float | None, sock_read: float | None) -> aiohttp.ClientTimeout:
    """One frozen ``ClientTimeout`` per setting triple, shared by every request (building one costs
    more than the rest of ``post``); a settings change simply asks for another triple."""
    return aiohttp.ClientTimeout(total=total, connect=connect, sock_read=sock_read)


@functools.lru_cache(maxsize=1024)
def _url(url: str) -> yarl.URL | str:
    """A channel URL parsed once (``yarl.URL`` is immutable), not by aiohttp on every request.
    One yarl cannot parse stays a string, so aiohttp raises its own ``InvalidUrlClientError``
    (a transport failure) as before."""
    try:
        return yarl.URL(url)
    except ValueError:
        return url


class _Pending:
    """The lean client's ``post`` coroutine, awaited or as an ``async with`` context manager."""

    __slots__ = ("_coro", "_resp")

    def __init__(self, coro: Awaitable[h1client.H1Response]) -> None:
        self._coro = coro
        self._resp: h1client.H1Response | None = None

    def __await__(self) -> Generator[Any, None, h1client.H1Response]:
        return self._coro.__await__()

    async def __aenter__(self) -> h1client.H1Response:
        self._resp = await self._coro
        return self._resp

    async def __aexit__(self, *exc_info: Any) -> None:
        if self._resp is not None:
            self._resp.release()


def _unsent(exc: BaseException) -> bool:
    """The request could not be written: the pooled keep-alive connection had been closed by
    the upstream (its idle timeout) as it was reused. The upstream never got the whole request,
    so sending it again on a fresh connection cannot double an LLM call."""
    return isinstance(exc, aiohttp.ClientOSError) and "Can not write request body" in str(exc)


class _ResendOnce:
    """``session.post(...)`` (awaitable and ``async with``), sent once more when the first send
    failed to write the request (``_unsent``). Seen under connection churn: about 1 request in
    2,000 answered 502 when the upstream closed an idle pooled connection at that instant."""

    __slots__ = ("_make", "_resp")

    def __init__(self, make: Callable[[], Awaitable[aiohttp.ClientResponse]]) -> None:
        self._make = make
        self._resp: aiohttp.ClientResponse | None = None

    async def _send(self) -> aiohttp.ClientResponse:
        try:
            return await self._make()
        except aiohttp.ClientOSError as exc:
            if not _unsent(exc):
                raise
        return await self._make()

    def __await__(self) -> Generator[Any, None, aiohttp.ClientResponse]:
        return self._send().__await__()

    async def __aenter__(self) -> aiohttp.ClientResponse:
        self._resp = await self._send()
        return await self._resp.__aenter__()

    async def __aexit__(self, *exc_info: Any) -> None:
        if self._resp is not None:
            await self._resp.__aexit__(*exc_info)
