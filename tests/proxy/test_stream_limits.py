"""Issue 13: an upstream stream honours a first-byte timeout, an idle timeout that keep-alive
drips do not reset, and a total cap. Each case would hang (the upstream never stops) without
the limit; the test bounds the wait and checks the error the client gets."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import orjson
import pytest
from aiohttp import web

from gateway.proxy.stream import StreamLimits

from .helpers import call, channel, chat_chunks, provider, snapshot

pytestmark = pytest.mark.asyncio

BODY = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]}


async def _drip(request: web.Request) -> web.StreamResponse:
    """``comments``: only keep-alive comments, forever; ``first-then-comments``: one content
    chunk, then comments; ``content``: a content chunk every 0.1 s, forever; ``finite``: twelve
    content chunks 0.1 s apart, then the end of the stream."""
    mode = request.match_info["mode"]
    resp = web.StreamResponse(headers={"content-type": "text/event-stream"})
    await resp.prepare(request)
    chunks = chat_chunks(["x"])
    if mode == "finite":
        await resp.write(chunks[0])
        for _ in range(12):
            await asyncio.sleep(0.1)
            await resp.write(chunks[1])
        for chunk in chunks[2:]:
            await resp.write(chunk)
        return resp
    try:
        if mode != "comments":
            await resp.write(chunks[0] + chunks[1])
        for _ in range(600):
            await asyncio.sleep(0.1)
            await resp.write(chunks[1] if mode == "content" else b": still here\n\n")
    except (ConnectionError, RuntimeError):
        pass
    return resp


@pytest.fixture
async def upstream():
    app = web.Application()
    app.router.add_post("/{mode}/v1/chat/completions", _drip)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    yield f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}"
    await runner.cleanup()


def _use(app, base: str, mode: str) -> None:
    app.holder.set(
        snapshot([provider(1, [channel(1, base_url=f"{base}/{mode}/v1", models={"m": "m"})], breaker=False)])
    )


async def test_first_byte_timeout_fails_the_attempt_before_anything_is_sent(app, upstream):
    _use(app, upstream, "comments")
    app.runtime.stream_first_byte_timeout = 0.5
    reply = await asyncio.wait_for(call(app, "POST", "/v1/chat/completions", BODY), 10)
    assert reply.status == 502, reply.body
    assert "no content within" in reply.json()["error"]["message"]


async def test_keepalive_drips_do_not_hold_a_stream_past_its_idle_timeout(app, upstream):
    _use(app, upstream, "first-then-comments")
    app.runtime.stream_idle_timeout = 0.5
    reply = await asyncio.wait_for(call(app, "POST", "/v1/chat/completions", BODY), 10)
    assert reply.status == 200
    last = [line for line in reply.body.split(b"\n") if line.startswith(b"data: {")][-1]
    assert orjson.loads(last[6:])["error"]["code"] == "upstream_idle_timeout"


async def test_a_stream_that_never_ends_is_cut_at_the_total_cap(app, upstream):
    _use(app, upstream, "content")
    app.runtime.stream_max_seconds = 1.0
    reply = await asyncio.wait_for(call(app, "POST", "/v1/chat/completions", BODY), 10)
    assert reply.status == 200
    last = [line for line in reply.body.split(b"\n") if line.startswith(b"data: {")][-1]
    assert orjson.loads(last[6:])["error"]["code"] == "upstream_stream_timeout"


async def test_events_within_the_idle_timeout_keep_a_long_stream_going(app, upstream):
    """1.2 s of events 0.1 s apart under a 0.3 s idle timeout: the stream's one timer fires
    before the stream is over and must re-arm at the moved deadline, not cut the stream."""
    _use(app, upstream, "finite")
    app.runtime.stream_idle_timeout = 0.3
    app.runtime.stream_first_byte_timeout = 0.5
    reply = await asyncio.wait_for(call(app, "POST", "/v1/chat/completions", BODY), 10)
    assert reply.status == 200
    events = [line for line in reply.body.split(b"\n") if line.startswith(b"data: {")]
    assert b"error" not in b"".join(events)
    assert sum(b'"content":"x"' in e for e in events) == 12
    assert reply.body.rstrip().endswith(b"data: [DONE]")


def _limits(idle: float) -> StreamLimits:
    rt = SimpleNamespace(stream_first_byte_timeout=0.0, stream_idle_timeout=idle, stream_max_seconds=0.0)
    att = SimpleNamespace(total_timeout=0.0, idle_timeout=0.0)
    return StreamLimits(SimpleNamespace(rt=rt), att)  # type: ignore[arg-type]


async def _timed_read(limits: StreamLimits, waiter: asyncio.Future) -> str:
    assert limits.arm(committed=True)
    try:
        try:
            await waiter
        finally:
            limits.disarm()
    except asyncio.CancelledError:
        if not limits.timed_out():
            raise
        return "timed out"
    return "read"


async def test_a_read_past_its_deadline_times_out_and_the_task_is_not_left_cancelled():
    limits = _limits(0.05)
    loop = asyncio.get_running_loop()

    async def reader() -> tuple[str, int, str]:
        first = await _timed_read(limits, loop.create_future())
        after = asyncio.current_task().cancelling()  # type: ignore[union-attr]
        limits.last_event = loop.time()  # an event arrived: the idle deadline moves on
        done = loop.create_future()
        loop.call_later(0.01, done.set_result, None)
        return first, after, await _timed_read(limits, done)  # the same limits go on timing reads

    assert await asyncio.wait_for(reader(), 5) == ("timed out", 0, "read")
    limits.close()
    assert limits.timer is None


async def test_a_cancellation_that_is_not_the_deadline_is_not_taken_for_a_timeout():
    """The client leaving cancels the request's task during a timed read: it must propagate."""
    limits = _limits(30.0)
    task = asyncio.ensure_future(_timed_read(limits, asyncio.get_running_loop().create_future()))
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert limits.timer is not None  # still set until the stream closes it
    limits.close()
    assert limits.timer is None


async def test_a_cancellation_racing_the_deadline_still_propagates():
    """The client leaves, and the deadline fires before the task has seen that cancellation
    (both in one turn of the loop): the read ends cancelled, not as a timeout."""
    limits = _limits(30.0)
    task = asyncio.ensure_future(_timed_read(limits, asyncio.get_running_loop().create_future()))
    await asyncio.sleep(0.01)
    task.cancel()
    limits.read_deadline = limits.loop.time() - 1  # the timer fires now, the task has not run yet
    limits._fire()
    with pytest.raises(asyncio.CancelledError):
        await task
    limits.close()
