"""SSRF guard for upstream calls (issue 13), off by default: with
``GATEWAY_UPSTREAM_SSRF_GUARD=1`` a channel's base URL may not reach a loopback, private,
link-local, multicast, reserved or unspecified address. It is checked on the resolved address of
every connection (a resolver that drops such addresses, so DNS tricks do not get around it) and
on IP literals in the URL, which aiohttp does not resolve.

``address_blocked`` is the one address check; an outbound fetcher (image URLs) should use it too."""

from __future__ import annotations

import ipaddress
import socket
from functools import lru_cache
from typing import Any
from urllib.parse import urlsplit

from aiohttp.abc import AbstractResolver
from aiohttp.resolver import DefaultResolver


class BlockedAddress(OSError):
    """The upstream's address is refused by the SSRF guard (a transport failure for the proxy)."""


def address_blocked(ip: str) -> bool:
    """Whether ``ip`` is an address a gateway must not be pointed at from outside."""
    try:
        addr = ipaddress.ip_address(ip.split("%", 1)[0])
    except ValueError:
        return True
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        addr = addr.ipv4_mapped
    return (addr.is_private or addr.is_loopback or addr.is_link_local or addr.is_multicast or addr.is_reserved
            or addr.is_unspecified)


@lru_cache(maxsize=1024)
def url_blocked(url: str) -> bool:
    """An IP literal host in ``url`` that ``address_blocked`` refuses (names are checked when
    they are resolved)."""
    try:
        host = urlsplit(url).hostname or ""
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return address_blocked(host)


class GuardedResolver(AbstractResolver):
    """The default resolver, minus refused addresses; nothing left raises ``BlockedAddress``."""

    def __init__(self) -> None:
        self._inner = DefaultResolver()

    async def resolve(self, host: str, port: int = 0, family: int = socket.AF_INET) -> list[dict[str, Any]]:
        results = await self._inner.resolve(host, port, family)
        allowed = [r for r in results if not address_blocked(r["host"])]
        if not allowed:
            raise BlockedAddress(f"upstream host {host!r} resolves only to addresses the SSRF guard refuses")
        return allowed

    async def close(self) -> None:
        await self._inner.close()
