"""The one outbound fetcher: everything the gateway downloads on a client's behalf (image URLs in
requests and responses) goes through ``fetch`` / ``fetch_many``.

Why one place: a URL in a client's request is attacker-controlled, so fetching it is a
server-side request forgery risk (cloud metadata at 169.254.169.254, admin ports on loopback,
hosts on the private network). The guard here checks the *resolved* address of every
connection (a custom aiohttp resolver), not the name in the URL, so a DNS name pointing at
127.0.0.1 is refused as surely as ``http://127.0.0.1/``; IP literals aiohttp does not resolve
(decimal ``2130706433``, octal ``0177.0.0.1``, short ``127.1``, IPv6-mapped ``::ffff:127.0.0.1``)
are decoded with the C library's own rules and checked before connecting. Redirects are followed
by hand, each hop going through the same checks; only http and https are fetched.

Operators who serve images from private hosts allow them with the global setting
``fetch_allow_private`` (config file ``settings: {fetch_allow_private: true}``, admin), pushed
here by the snapshot holder, or the environment variable ``GATEWAY_FETCH_ALLOW_PRIVATE=1`` for
the whole process (the test suite and the demo serve images from loopback).

A failed fetch is an exception to the caller (``FetchError``); callers that rewrite URLs leave
the URL as it was.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import socket
from dataclasses import dataclass
from typing import Any

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import DefaultResolver
from yarl import URL

log = logging.getLogger("gateway.fetch")

ALLOW_ENV = "GATEWAY_FETCH_ALLOW_PRIVATE"
MAX_REDIRECTS = 5
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
CHUNK = 64 * 1024

_setting_allow_private = False


class FetchError(Exception):
    """A fetch that produced no body: refused by the guard, transport error, non-2xx, too large,
    too slow. ``reason`` is a short token for logs and captures."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


class AddressRefused(OSError):
    """Raised by the resolver for a forbidden address; an OSError so aiohttp wraps it as a
    connection error like any other failed connect."""


def set_setting_allow_private(allow: bool) -> None:
    """The global setting's value (the snapshot holder calls this on every snapshot)."""
    global _setting_allow_private
    _setting_allow_private = bool(allow)


_setting_guard_channels = False


def set_setting_guard_channels(on: bool) -> None:
    """The global ``guard_channel_urls`` setting (the snapshot holder calls this)."""
    global _setting_guard_channels
    _setting_guard_channels = bool(on)


def channels_unguarded() -> bool:
    """The upstream client's resolver policy: channel base URLs may be private unless the
    operator turned ``guard_channel_urls`` on."""
    return not _setting_guard_channels


def check_channel_url(url: str, force: bool = False) -> None:
    """Raise ``AddressRefused`` for a channel URL whose host is a forbidden IP literal while
    ``guard_channel_urls`` is on, or ``force`` (GATEWAY_UPSTREAM_SSRF_GUARD) is set (names are
    checked by the upstream client's resolver)."""
    if not (_setting_guard_channels or force):
        return
    addr = literal_address(URL(url).raw_host or "")
    if addr is not None:
        reason = refusal_reason(addr)
        if reason:
            raise AddressRefused(f"channel base URL points at a {reason} ({addr})")


_process_allow: bool | None = None  # GATEWAY_FETCH_ALLOW_PRIVATE, read once (tests set it directly)


def allow_private() -> bool:
    """Private targets allowed: the process-wide knob or the global setting."""
    global _process_allow
    if _process_allow is None:
        from gateway.conf import gateway_settings

        _process_allow = bool(gateway_settings.FETCH_ALLOW_PRIVATE)
    return _process_allow or _setting_allow_private


def literal_address(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The address a host string denotes without DNS, by the same rules the C library applies
    (``inet_aton``: decimal ``2130706433``, octal ``0177.0.0.1``, hex ``0x7f.1``, short
    ``127.1``), or None for a name."""
    host = host.strip("[]")
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    try:
        return ipaddress.IPv4Address(socket.inet_aton(host))
    except (OSError, ValueError):
        return None


def refusal_reason(addr: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str | None:
    """Why connecting to ``addr`` is refused, or None when it is a public address. Anything not
    globally routable is refused (loopback, private, link-local incl. metadata 169.254.169.254,
    shared CGNAT space, unspecified, reserved, documentation), plus multicast; IPv6 addresses that
    embed an IPv4 one (mapped, 6to4, NAT64 well-known prefix) are judged by that address."""
    if isinstance(addr, ipaddress.IPv6Address):
        embedded = addr.ipv4_mapped or addr.sixtofour
        if embedded is None and addr in _NAT64:
            embedded = ipaddress.IPv4Address(int(addr) & 0xFFFFFFFF)
        if (
            embedded is None and int(addr) >> 32 == 0 and int(addr) > 1
        ):  # deprecated IPv4-compatible ::a.b.c.d
            embedded = ipaddress.IPv4Address(int(addr))
        if embedded is not None:
            inner = refusal_reason(embedded)
            return f"embedded {inner}" if inner else None
    if addr.is_loopback:
        return "loopback address"
    if addr.is_link_local:
        return "link-local address"
    if addr.is_multicast:
        return "multicast address"
    if addr.is_unspecified:
        return "unspecified address"
    if addr.is_private:
        return "private address"
    if not addr.is_global:
        return "non-public address"
    return None


_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")


class GuardedResolver(AbstractResolver):
    """Resolves with the system resolver, then refuses the whole name when any of its addresses
    is forbidden (a name that resolves to a public and a loopback address is not trusted either).
    ``allow`` is consulted per resolution so a settings change applies at once."""

    def __init__(self, allow=allow_private) -> None:
        self._inner = DefaultResolver()
        self._allow = allow

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        infos = await self._inner.resolve(host, port, family)
        if self._allow():
            return infos
        for info in infos:
            try:
                addr = ipaddress.ip_address(info["host"])
            except ValueError:
                raise AddressRefused(f"{host} resolved to an unparseable address") from None
            reason = refusal_reason(addr)
            if reason:
                raise AddressRefused(f"{host} resolves to a {reason} ({addr})")
        return infos

    async def close(self) -> None:
        await self._inner.close()


def check_url(url: URL, allow: bool | None = None) -> None:
    """Refuse a URL before any connection: scheme, missing host, and IP literals (which aiohttp
    connects to without asking the resolver)."""
    if url.scheme not in ("http", "https"):
        raise FetchError("scheme_refused", f"only http and https URLs are fetched, not {url.scheme!r}")
    host = url.raw_host or ""
    if not host:
        raise FetchError("bad_url", "the URL has no host")
    if allow if allow is not None else allow_private():
        return
    addr = literal_address(host)
    if addr is not None:
        reason = refusal_reason(addr)
        if reason:
            raise FetchError("address_refused", f"refusing to fetch from a {reason} ({addr})")


@dataclass(slots=True)
class Fetched:
    url: str  # the final URL after redirects
    status: int
    content_type: str | None  # the header without parameters, lower-case; None when absent
    body: bytes


class Fetcher:
    """A lazily created aiohttp session with the guarded resolver. One per process (``fetcher()``);
    the session belongs to the event loop that first used it and is rebuilt for another loop."""

    def __init__(self) -> None:
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _get_session(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        if self._session is None or self._session.closed or self._loop is not loop:
            # No keep-alive reuse (force_close) and no DNS cache: every connection is resolved
            # and checked afresh, so a flipped setting or a rebinding DNS answer cannot ride on
            # an old connection. Image fetches are rare enough that this costs nothing visible.
            connector = aiohttp.TCPConnector(
                resolver=GuardedResolver(), use_dns_cache=False, force_close=True, limit=64
            )
            self._session = aiohttp.ClientSession(
                connector=connector,
                trust_env=False,
                auto_decompress=True,
                headers={"User-Agent": "monogate-fetch/1"},
            )
            self._loop = loop
        return self._session

    async def close(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()
        self._session = None

    async def fetch(
        self, url: str, *, timeout: float, max_bytes: int, max_redirects: int = MAX_REDIRECTS
    ) -> Fetched:
        """GET ``url`` with the guard on every hop; the whole fetch (redirects included) within
        ``timeout`` seconds, the body refused as soon as it would exceed ``max_bytes``."""
        try:
            async with asyncio.timeout(timeout):
                return await self._fetch(url, max_bytes, max_redirects)
        except TimeoutError:
            raise FetchError("timeout", f"fetch took longer than {timeout:g}s") from None
        except FetchError:
            raise
        except AddressRefused as exc:
            raise FetchError("address_refused", str(exc)) from None
        except aiohttp.ClientConnectorError as exc:
            cause = exc.os_error
            if isinstance(cause, AddressRefused):
                raise FetchError("address_refused", str(cause)) from None
            raise FetchError("connect_failed", f"could not connect: {exc}") from None
        except (aiohttp.ClientError, OSError, ValueError) as exc:
            raise FetchError("transport_error", f"{type(exc).__name__}: {exc}") from None

    async def _fetch(self, url: str, max_bytes: int, max_redirects: int) -> Fetched:
        session = self._get_session()
        current = URL(url)
        for _hop in range(max_redirects + 1):
            check_url(current)
            async with session.get(current, allow_redirects=False) as resp:
                if resp.status in REDIRECT_STATUSES and resp.headers.get("Location"):
                    current = current.join(URL(resp.headers["Location"]))
                    continue
                if not 200 <= resp.status < 300:
                    raise FetchError("status", f"upstream answered HTTP {resp.status}")
                length = resp.content_length
                if length is not None and length > max_bytes:
                    raise FetchError("too_large", f"Content-Length {length} exceeds {max_bytes} bytes")
                chunks: list[bytes] = []
                size = 0
                async for chunk in resp.content.iter_chunked(CHUNK):
                    size += len(chunk)
                    if size > max_bytes:
                        raise FetchError("too_large", f"body exceeds {max_bytes} bytes")
                    chunks.append(chunk)
                ctype = resp.headers.get("Content-Type")
                media = ctype.split(";", 1)[0].strip().lower() if ctype else None
                return Fetched(
                    url=str(current), status=resp.status, content_type=media or None, body=b"".join(chunks)
                )
        raise FetchError("too_many_redirects", f"more than {max_redirects} redirects")

    async def fetch_many(self, urls: list[str], *, timeout: float, max_bytes: int) -> dict[str, Any]:
        """Every distinct URL fetched concurrently: url -> Fetched or FetchError."""
        unique = list(dict.fromkeys(urls))

        async def one(u: str) -> Any:
            try:
                return await self.fetch(u, timeout=timeout, max_bytes=max_bytes)
            except FetchError as exc:
                log.info("fetch failed (%s): %s", exc.reason, exc.message)
                return exc

        results = await asyncio.gather(*(one(u) for u in unique))
        return dict(zip(unique, results, strict=True))


_FETCHER = Fetcher()


def fetcher() -> Fetcher:
    return _FETCHER
