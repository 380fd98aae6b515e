"""The limiter's own Redis connection (``redis_pipe``): replies read however the bytes arrive,
and a Redis that stops answering fails the commands in flight after the timeout, so the limiter
falls back to counting in the worker instead of stalling requests."""

from __future__ import annotations

import asyncio
import time

import pytest
from redis.exceptions import NoScriptError, ResponseError

from gateway.proxy.limits import KeyLimits, RedisLimiter
from gateway.proxy.redis_pipe import INCOMPLETE, encode, encode_ints, parse
from gateway.proxy.usage_tap import UsageTap


@pytest.mark.parametrize(
    ("wire", "value"),
    [
        (b"*2\r\n:0\r\n:-1\r\n", [0, -1]),
        (b":42\r\n", 42),
        (b"$5\r\nhello\r\n", b"hello"),
        (b"$-1\r\n", None),
        (b"+OK\r\n", b"OK"),
        (b"*2\r\n*1\r\n$2\r\nab\r\n$0\r\n\r\n", [[b"ab"], b""]),
    ],
)
def test_a_reply_is_read_only_once_all_of_it_arrived(wire, value):
    for cut in range(len(wire)):
        assert parse(bytearray(wire[:cut]), 0) is INCOMPLETE
    assert parse(bytearray(wire + b":1\r\n"), 0) == (value, len(wire))


def test_errors_are_values_and_noscript_is_its_own():
    noscript, end = parse(bytearray(b"-NOSCRIPT No matching script.\r\n"), 0)
    assert isinstance(noscript, NoScriptError) and end == 31
    other, _ = parse(bytearray(b"-ERR wrong number of arguments\r\n"), 0)
    assert isinstance(other, ResponseError) and not isinstance(other, NoScriptError)


def test_commands_are_arrays_of_bulk_strings():
    assert encode(("SELECT", 3)) == b"*2\r\n$6\r\nSELECT\r\n$1\r\n3\r\n"
    assert encode(("GET",), count=2) + encode_ints((10,)) == encode(("GET", 10))


async def test_a_redis_that_stops_answering_falls_back_to_counting_in_the_worker():
    async def silent(reader, writer):
        while await reader.read(65536):
            pass  # takes every command, answers none
        writer.close()

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    import redis.asyncio as aioredis

    client = aioredis.from_url(f"redis://127.0.0.1:{port}/0", socket_timeout=0.1, socket_connect_timeout=1)
    limiter = RedisLimiter(client)
    limits = KeyLimits(rpm=1, concurrency=5)
    try:
        started = time.monotonic()
        assert await limiter.admit(1, limits, time.time()) is None  # counted locally
        assert time.monotonic() - started < 1.0 and limiter.down_until > time.monotonic()
        refused = limiter.begin(1, limits, time.time())  # while down: known at once, locally
        assert refused.result is not None and refused.result.status == 429
        refused.end(UsageTap())
        await limiter.drain()
    finally:
        await limiter.aclose()
        await client.aclose()
        server.close()
        await server.wait_closed()
