"""A request the upstream never got (the pooled keep-alive connection was closed by the upstream
as it was reused: "Can not write request body") is sent once more on a fresh connection; any
other transport error is not (the upstream may have the request: resending could double a call).
Seen under the 2,000-connection churn of tests/resilience/test_churn.py: one 502 in 2,000."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest

from gateway.proxy.upstream import _ResendOnce

pytestmark = pytest.mark.unit


class FakeResponse:
    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        self.exited = True


def sender(errors: list[BaseException]):
    calls = []

    async def make():
        calls.append(1)
        if errors:
            raise errors.pop(0)
        return FakeResponse()

    return make, calls


def test_an_unwritten_request_is_sent_once_more():
    make, calls = sender([aiohttp.ClientOSError(None, "Can not write request body for http://u/v1/chat")])

    async def go():
        async with _ResendOnce(make) as resp:
            assert isinstance(resp, FakeResponse)
        return resp

    assert asyncio.run(go()).exited and len(calls) == 2


def test_only_once_and_only_for_an_unwritten_request():
    unwritten = aiohttp.ClientOSError(None, "Can not write request body for http://u/v1/chat")
    make, calls = sender([unwritten, unwritten])
    with pytest.raises(aiohttp.ClientOSError):
        asyncio.run(_ResendOnce(make)._send())
    assert len(calls) == 2
    make, calls = sender([aiohttp.ServerDisconnectedError()])
    with pytest.raises(aiohttp.ServerDisconnectedError):
        asyncio.run(_ResendOnce(make)._send())
    assert len(calls) == 1
    make, calls = sender([aiohttp.ClientOSError(104, "Connection reset by peer")])
    with pytest.raises(aiohttp.ClientOSError):
        asyncio.run(_ResendOnce(make)._send())
    assert len(calls) == 1
