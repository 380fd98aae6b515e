"""Issue 13: one upstream must not cost unbounded memory or CPU. A gzip answer is limited by its
decompressed size, SSE lines are capped and parsed in linear time, and streamed text is
accumulated in linear time.

Linear-time checks run the work in a thread with a generous bound: the old code took minutes
for the same input (measured: 200k deltas 120 s, an 8 MB line fed in 1 KB reads far longer)."""

from __future__ import annotations

import gzip
import threading

import pytest
from aiohttp import web

from gateway.errors import AttemptFailed
from gateway.protocols import sse
from gateway.protocols.sse import SSELineTooLong, SSEParser
from gateway.proxy.upstream import UpstreamClient
from gateway.proxy.whole import read_bounded
from gateway.urp import events as ev
from gateway.urp.accumulate import apply_delta
from gateway.urp.nodes import TextNode
from gateway.wiring import build_proxy_app

from .helpers import call, channel, chat_chunks, provider, serve_post, snapshot


def run_bounded(fn, seconds: float) -> bool:
    t = threading.Thread(target=fn, daemon=True)
    t.start()
    t.join(seconds)
    return not t.is_alive()


def test_accumulating_many_deltas_is_linear():
    node = TextNode(content="")

    def work():
        for _ in range(200_000):
            apply_delta(node, ev.TEXT, "abcdefghij")

    assert run_bounded(work, 20)
    assert len(node.content) == 2_000_000


def test_sse_long_line_in_small_reads_is_linear_and_capped():
    parser = SSEParser(max_line=32 * 1024 * 1024)
    out = []

    def work():
        out.extend(parser.feed(b"data: "))
        piece = b"x" * 1024
        for _ in range(8 * 1024):
            out.extend(parser.feed(piece))
        out.extend(parser.feed(b"\n\n"))

    assert run_bounded(work, 20)
    assert len(out) == 1 and len(out[0][1]) == 8 * 1024 * 1024
    small = SSEParser(max_line=1000)
    with pytest.raises(SSELineTooLong):
        for _ in range(5):
            list(small.feed(b"y" * 300))
    with pytest.raises(SSELineTooLong):  # many short data lines in one event count too
        list(SSEParser(max_line=1000).feed(b"data: abcdefghij\n" * 200))


def test_sse_parser_still_handles_crlf_split_across_reads():
    parser = SSEParser()
    got = list(parser.feed(b"event: a\r")) + list(parser.feed(b"\ndata: 1\r\n\r")) + list(parser.feed(b"\n"))
    got += list(parser.feed(b"data: 2\r\rdata: 3\n\n")) + list(parser.close())
    assert got == [("a", "1"), (None, "2"), (None, "3")]


@pytest.mark.asyncio
@pytest.mark.parametrize("impl", ["h1", "aiohttp"])
async def test_gzip_answer_is_limited_by_its_decompressed_size(impl):
    bomb = gzip.compress(b"0" * (64 * 1024 * 1024))  # ~64 KB on the wire

    async def handler(request):
        return web.Response(
            body=bomb, headers={"Content-Encoding": "gzip", "Content-Type": "application/json"}
        )

    runner, port = await serve_post(handler)
    client = UpstreamClient(impl=impl)
    try:
        async with client.post(
            f"http://127.0.0.1:{port}/x", b"", {}, total=5, connect=5, sock_read=None
        ) as resp:
            assert resp.content_length == len(bomb)
            with pytest.raises(AttemptFailed) as info:
                await read_bounded(resp, 1024 * 1024)
            assert info.value.code == "upstream_response_too_large"
            if impl == "h1":
                assert resp.pending  # the rest was never inflated: the reader stopped first
    finally:
        await client.close()
        await runner.cleanup()


@pytest.mark.asyncio
async def test_an_over_long_sse_line_fails_the_attempt_not_the_worker(monkeypatch):
    monkeypatch.setattr(sse, "MAX_LINE", 4096)
    state = {"n": 0}

    async def handler(request):
        state["n"] += 1
        resp = web.StreamResponse(headers={"content-type": "text/event-stream"})
        await resp.prepare(request)
        if request.match_info["tail"].startswith("long"):
            await resp.write(b"data: " + b"z" * 10_000)
        else:
            for chunk in chat_chunks(["fine"]):
                await resp.write(chunk)
        await resp.write_eof()
        return resp

    runner, port = await serve_post(handler)
    proxy = build_proxy_app()
    try:
        proxy.holder.set(
            snapshot(
                [
                    provider(1, [channel(1, base_url=f"http://127.0.0.1:{port}/long/v1", models={"m": "m"})]),
                    provider(
                        2,
                        [channel(2, base_url=f"http://127.0.0.1:{port}/ok/v1", models={"m": "m"})],
                        priority=1,
                    ),
                ]
            )
        )
        body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
        reply = await call(proxy, "POST", "/v1/chat/completions", body)
        assert reply.status == 200 and b"fine" in reply.body  # failed over past the bad upstream
        assert state["n"] == 2
    finally:
        await proxy.client.close()
        await runner.cleanup()
