"""The admin's "Test channel" action, project side: channels from the ORM (enabled or not, so
a channel can be checked before it takes traffic) handed to the core's ``probe.check_channel``,
all checked concurrently."""

from __future__ import annotations

import asyncio
from typing import Any

from gateway.live_config import channel_snap, provider_snap, settings_snap
from gateway.proxy.probe import check_channel
from gateway.proxy.upstream import UpstreamClient


def run_checks(pairs: list[tuple[Any, str]], timeout: float = 30.0) -> list[dict[str, Any]]:
    """``pairs``: (Channel, model) to check. One result per pair, in order."""
    settings = settings_snap()
    jobs = []
    for ch, model in pairs:
        jobs.append((provider_snap(ch.provider, (), ()), channel_snap(ch, ch.provider.multiplier), model))

    async def main() -> list[dict[str, Any]]:
        client = UpstreamClient()
        try:
            return list(
                await asyncio.gather(*(check_channel(p, c, m, settings, client, timeout) for p, c, m in jobs))
            )
        finally:
            await client.close()

    return asyncio.run(main())
