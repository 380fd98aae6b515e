"""The e2e harness itself: extra servers with their own environment (here: with Redis), each on
its own port and log file, reading the same test database as the session server."""

from __future__ import annotations

import os

import openai
import pytest

from tests.servers import make_key, make_route

REDIS_URL = os.environ.get("REDIS_URL_FOR_TESTS", "redis://127.0.0.1:6379/15")


def redis_or_skip() -> str:
    """The Redis URL for tests; skips when Redis is down, unless CI requires services."""
    import redis

    try:
        redis.Redis.from_url(REDIS_URL, socket_connect_timeout=1).ping()
    except redis.RedisError:
        if os.environ.get("GATEWAY_REQUIRE_SERVICES") == "1":
            raise
        pytest.skip(f"Redis not reachable at {REDIS_URL}")
    return REDIS_URL


def test_extra_server_with_redis_serves_the_same_config(gateway, gateway_factory, mock_upstream):
    make_route("messages", "e2e-harness", mock_upstream.base_url("messages"), upstream_model="up-harness")
    _, secret = make_key()
    extra = gateway_factory({"REDIS_URL": redis_or_skip()})
    assert extra.port != gateway.port and extra.log_path != gateway.log_path
    extra.wait_config()
    gateway.wait_config()
    for server in (gateway, extra):
        client = openai.OpenAI(base_url=server.url + "/v1", api_key=secret, max_retries=0)
        reply = client.chat.completions.create(
            model="e2e-harness", messages=[{"role": "user", "content": "hi"}]
        )
        assert reply.choices[0].message.content == "Echo: hi"
    assert [r["body"]["model"] for r in mock_upstream.requests()] == ["up-harness", "up-harness"]
