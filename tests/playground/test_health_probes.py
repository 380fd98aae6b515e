"""Scheduled channel health probes: results kept in Redis for the admin's channel list, a
failed probe opens the channel in the breaker map the proxy workers share, a passing one
closes it."""

from __future__ import annotations

import os

import pytest

from tests.servers import make_route

REDIS_URL = os.environ.get("REDIS_URL_FOR_TESTS", "redis://127.0.0.1:6379/15")


@pytest.fixture
def redis_db():
    import redis

    client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=1)
    try:
        client.ping()
    except redis.RedisError:
        pytest.skip(f"no Redis at {REDIS_URL}")
    client.flushdb()
    yield client
    client.flushdb()


def test_probes_feed_the_breaker_and_the_admin(db, admin_client, mock_upstream, redis_db, settings):
    from gateway.proxy.breaker import RedisMirror
    from providers.health import HEALTH_KEY, probe_all
    from providers.models import Channel

    ok = make_route("chat_completion", "gpt-ok", mock_upstream.base_url("chat_completion"))
    down = make_route("chat_completion", "gpt-down", "http://127.0.0.1:1/v1")
    no_breaker = make_route(
        "chat_completion", "gpt-nb", "http://127.0.0.1:1/v1", circuit_breaker_enabled=False
    )
    off = make_route("chat_completion", "gpt-off", "http://127.0.0.1:1/v1")
    Channel.objects.filter(pk=off.channel.pk).update(enabled=False)
    redis_db.hset(RedisMirror.OPEN_KEY, str(ok.channel.pk), "9999999999")  # a stale open entry

    results = {r["channel_id"]: r for r in probe_all(REDIS_URL, timeout=5)}
    assert set(results) == {ok.channel.pk, down.channel.pk, no_breaker.channel.pk}  # disabled: not probed
    assert results[ok.channel.pk]["ok"] and results[down.channel.pk]["error"] == "connect refused 127.0.0.1:1"
    opened = {int(k) for k in redis_db.hgetall(RedisMirror.OPEN_KEY)}
    assert opened == {down.channel.pk}  # the passing probe closed the stale entry; no breaker: left alone
    assert redis_db.hlen(HEALTH_KEY) == 3

    settings.REDIS_URL = REDIS_URL
    html = admin_client.get("/admin/providers/channel/").content.decode()
    assert "connect refused 127.0.0.1:1" in html and ">OK</span>" in html


def test_task_is_scheduled_only_when_asked():
    from gateway.settings import health_probe_schedule

    assert health_probe_schedule("redis://x/0", 60.0) == {
        "channel-health-probes": {"task": "providers.tasks.probe_channels", "schedule": 60.0}
    }
    assert health_probe_schedule("redis://x/0", 0.0) == {}
    assert health_probe_schedule("", 60.0) == {}
