"""``/readyz`` (ready for traffic) next to ``/healthz`` (alive), in-process: a configuration
source that can be made unreachable stands in for the database; the poller thread is the one
that notices, the request only reads what it recorded."""

from __future__ import annotations

import asyncio
import threading

import pytest

from gateway.proxy.app import ProxyApp
from gateway.proxy.config import ProxyConfig

from .helpers import call, snapshot

pytestmark = pytest.mark.asyncio


class FlakySource:
    """A ConfigSource whose ``version()`` fails while ``down`` is set (a database outage)."""

    def __init__(self) -> None:
        self.down = threading.Event()
        self.slow_first = threading.Event()  # set: the first build waits until released
        self.release_first = threading.Event()

    def version(self) -> tuple[int, int]:
        if self.down.is_set():
            raise ConnectionError("database unreachable")
        return (7, 0)

    def build(self, version: tuple[int, int]):
        if self.slow_first.is_set():
            self.release_first.wait(5)
        return snapshot([])

    def record_key_use(self, key_ids: list[int]) -> None:
        pass

    def release(self) -> None:
        pass


async def wait_for(predicate, timeout: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not await predicate():
        assert asyncio.get_running_loop().time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.05)


@pytest.fixture
async def source_and_app():
    source = FlakySource()
    app = ProxyApp(ProxyConfig(config_poll_seconds=0.05), source, lambda *a: None)
    yield source, app
    app.holder.stop()
    await app.client.close()


async def test_not_ready_before_the_first_snapshot_then_ready(source_and_app):
    source, app = source_and_app
    source.slow_first.set()
    app.holder.start()
    reply = await call(app, "GET", "/readyz", secret=None)  # answers at once, does not wait
    assert reply.status == 503 and reply.json()["reason"] == "configuration not loaded"
    source.release_first.set()

    async def ready() -> bool:
        return (await call(app, "GET", "/readyz", secret=None)).status == 200

    await wait_for(ready)
    assert (await call(app, "GET", "/readyz", secret=None)).json() == {
        "status": "ready",
        "reason": "ok",
        "config_version": 7,
    }


async def test_database_outage_makes_it_unready_but_still_alive(source_and_app):
    source, app = source_and_app
    app.holder.stale_after = 0.5  # default max(5 polls, 3 s)
    app.holder.start()

    async def status() -> int:
        return (await call(app, "GET", "/readyz", secret=None)).status

    async def ready() -> bool:
        return await status() == 200

    async def unready() -> bool:
        return await status() == 503

    await wait_for(ready)
    source.down.set()
    await wait_for(unready)
    body = (await call(app, "GET", "/readyz", secret=None)).json()
    assert body["reason"] == "configuration source (database) not reachable"
    health = await call(app, "GET", "/healthz", secret=None)  # alive: serving on the snapshot
    assert health.status == 200 and health.json()["status"] == "ok"
    source.down.clear()
    await wait_for(ready)


async def test_unready_while_shutting_down(source_and_app):
    source, app = source_and_app
    app.holder.start()
    flushed = []
    app.on_shutdown(lambda: flushed.append(True))

    async def ready() -> bool:
        return (await call(app, "GET", "/readyz", secret=None)).status == 200

    await wait_for(ready)
    await app.shutdown()
    assert flushed == [True]
    reply = await call(app, "GET", "/readyz", secret=None)
    assert reply.status == 503 and reply.json()["reason"] == "shutting down"
