"""SSRF guard for upstream calls (issue 13), off by default: with
``GATEWAY_UPSTREAM_SSRF_GUARD=1`` (or the global setting ``guard_channel_urls``) a channel's base
URL may not reach a loopback, private, link-local, multicast, reserved or unspecified address.

There is one address check, :func:`gateway.fetch.refusal_reason`, shared with the image fetcher:
the upstream client uses ``gateway.fetch.GuardedResolver`` (resolved addresses, so DNS tricks do
not get around it) and ``gateway.fetch.check_channel_url`` (IP literals, which aiohttp does not
resolve). This module keeps the names issue 13 exposed."""

from __future__ import annotations

import ipaddress

from gateway.fetch import AddressRefused, refusal_reason

BlockedAddress = AddressRefused  # the upstream's address is refused (a transport failure for the proxy)


def address_blocked(ip: str) -> bool:
    """Whether ``ip`` is an address a gateway must not be pointed at from outside."""
    try:
        addr = ipaddress.ip_address(ip.split("%", 1)[0])
    except ValueError:
        return True
    return refusal_reason(addr) is not None
