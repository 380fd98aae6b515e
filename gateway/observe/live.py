"""The live tail's publishing side: request events to the ``live_tail`` channel-layer group.

Cheap on the hot path: :data:`viewers` counts the live-tail WebSockets connected to this
process (the consumer in ``gateway.observe.consumer`` keeps it), and the recorder publishes only
when it is non-zero; a publish is a fire-and-forget task doing ``group_send``.

Several workers: the WebSocket lands on one worker, whose count goes up; other workers' counts
stay at zero and their requests are not shown unless they learn about the viewer. With a Redis
channel layer (``REDIS_URL`` set), each process polls the group's membership in Redis every
``POLL_SECONDS`` (off the request path) and publishes while anyone anywhere is watching. With
the in-memory layer (no Redis), a viewer sees only the requests of the worker it is connected to.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

log = logging.getLogger("gateway.observe.live")

GROUP = "live_tail"
POLL_SECONDS = 2.0
viewers = 0  # live-tail sockets connected to this process
remote_viewers = False  # some process has one (Redis layer only; refreshed by the poller)
_tasks: set[asyncio.Task] = set()
_layer: Any = None
_poller: asyncio.Task | None = None
poll_checked = False  # start_poller ran in this process


def watching() -> bool:
    """Whether a request should be published: one int and one bool read."""
    return viewers > 0 or remote_viewers


def add_viewer() -> None:
    global viewers
    viewers += 1


def remove_viewer() -> None:
    global viewers
    viewers = max(0, viewers - 1)


def _channel_layer() -> Any:
    global _layer
    if _layer is None:
        from channels.layers import get_channel_layer

        _layer = get_channel_layer()
    return _layer


def publish(event: dict[str, Any]) -> None:
    """Send ``event`` to every live-tail viewer, without waiting (needs a running loop)."""
    try:
        layer = _channel_layer()
        if layer is None:
            return
        task = asyncio.get_running_loop().create_task(
            layer.group_send(GROUP, {"type": "live.event", "event": event})
        )
    except Exception:
        log.debug("live tail publish failed", exc_info=True)
        return
    _tasks.add(task)
    task.add_done_callback(_done)


def _done(task: asyncio.Task) -> None:
    _tasks.discard(task)
    if not task.cancelled() and task.exception() is not None:
        log.debug("live tail group_send failed: %r", task.exception())


def start_poller() -> None:
    """With a Redis channel layer, start (once per process) the task that watches the group's
    membership in Redis, so workers without a local viewer publish too. Never raises: it runs
    in the recorder factory, on the request path."""
    global _poller, poll_checked
    poll_checked = True
    try:
        layer = _channel_layer()
        if layer is not None and hasattr(layer, "consistent_hash"):  # channels_redis; else per-process only
            _poller = asyncio.get_running_loop().create_task(_poll(layer))
    except Exception:
        log.warning(
            "live tail: cannot watch viewers across workers; this worker publishes only to its own",
            exc_info=True,
        )


async def _poll(layer: Any) -> None:
    global remote_viewers
    import time

    key = layer._group_key(GROUP)
    while True:
        try:
            conn = layer.connection(layer.consistent_hash(GROUP))
            # members are scored by join time; expired ones do not count
            remote_viewers = bool(await conn.zcount(key, time.time() - layer.group_expiry, "+inf"))
        except Exception:
            log.debug("live tail poll failed", exc_info=True)
        await asyncio.sleep(POLL_SECONDS)
