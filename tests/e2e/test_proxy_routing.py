"""The proxy's routing behaviour through the production server and the mock upstream:
failover, same-channel retry on 429, no switch after the first byte, the circuit breaker
opening and closing, client disconnects freeing the upstream, and live reload."""

from __future__ import annotations

import os
import time

import httpx
import orjson
import pytest

from tests.servers import make_key, make_route

CHAT = "/v1/chat/completions"


def ask(server, secret: str, model: str, text: str = "hi", **extra) -> httpx.Response:
    return server.client.post(
        CHAT,
        headers={"authorization": f"Bearer {secret}"},
        json={"model": model, "messages": [{"role": "user", "content": text}], **extra},
        timeout=20,
    )


def upstream_hits(mock_upstream, marker: str) -> int:
    return sum(1 for r in mock_upstream.requests() if marker in r["path"])


def test_failover_from_failing_channel_to_next_provider(gateway, mock_upstream):
    make_route("chat_completion", "fo", mock_upstream.base_url("chat_completion", "status=500"), priority=0)
    make_route("chat_completion", "fo", mock_upstream.base_url("chat_completion"), priority=1)
    _, secret = make_key()
    gateway.wait_config()
    response = ask(gateway, secret, "fo", "failover please")
    assert response.status_code == 200, response.text
    assert response.json()["choices"][0]["message"]["content"] == "Echo: failover please"
    records = mock_upstream.requests()
    assert ["status=500" in r["path"] for r in records] == [True, False]


def test_retry_same_channel_on_429(gateway, mock_upstream):
    base = mock_upstream.base_url("chat_completion", "status=429,fail-times=1,fail-key=e2e-429")
    make_route("chat_completion", "r429", base, channel_max_retries=1)
    _, secret = make_key()
    gateway.wait_config()
    response = ask(gateway, secret, "r429", "again")
    assert response.status_code == 200, response.text
    assert upstream_hits(mock_upstream, "fail-key=e2e-429") == 2


def test_all_failed_is_502_without_upstream_details(gateway, mock_upstream):
    route = make_route("chat_completion", "dead", mock_upstream.base_url("chat_completion", "status=503"))
    _, secret = make_key()
    gateway.wait_config()
    response = ask(gateway, secret, "dead")
    assert response.status_code == 502
    error = response.json()["error"]
    assert error["upstream_status"] == 503
    assert mock_upstream.url not in response.text and "127.0.0.1" not in response.text
    assert route.upstream_key not in response.text
    assert response.headers["x-request-id"] and float(response.headers["x-gateway-overhead-ms"]) >= 0


def test_no_switch_after_first_byte(gateway, mock_upstream):
    make_route(
        "chat_completion", "cut", mock_upstream.base_url("chat_completion", "disconnect-after=2"), priority=0
    )
    make_route("chat_completion", "cut", mock_upstream.base_url("chat_completion"), priority=1)
    _, secret = make_key()
    gateway.wait_config()
    response = ask(gateway, secret, "cut", "a long answer please", stream=True)
    assert response.status_code == 200
    frames = [line[6:] for line in response.text.split("\n") if line.startswith("data: ")]
    assert frames[-1] == "[DONE]"
    error = orjson.loads(frames[-2])["error"]
    assert error["code"] == "upstream_stream_incomplete"
    assert len(mock_upstream.requests()) == 1  # the second provider was never called


def test_breaker_opens_then_closes_after_cooldown(gateway_factory, mock_upstream):
    mock_upstream.reset()
    server = gateway_factory({"GATEWAY_BREAKER_COOLDOWN_SECONDS": "1"})
    flaky = mock_upstream.base_url("chat_completion", "status=500,fail-times=3,fail-key=e2e-breaker")
    make_route("chat_completion", "brk", flaky, priority=0)
    make_route("chat_completion", "brk", mock_upstream.base_url("chat_completion"), priority=1)
    _, secret = make_key()
    server.wait_config()
    for _ in range(3):  # three failures on the first provider, each saved by the second
        assert ask(server, secret, "brk").status_code == 200
    assert upstream_hits(mock_upstream, "e2e-breaker") == 3
    assert ask(server, secret, "brk").status_code == 200
    assert upstream_hits(mock_upstream, "e2e-breaker") == 3  # open: skipped
    time.sleep(1.2)  # cooldown over: half-open, tried again, and it now succeeds
    assert ask(server, secret, "brk").status_code == 200
    assert upstream_hits(mock_upstream, "e2e-breaker") == 4
    assert ask(server, secret, "brk").status_code == 200
    assert upstream_hits(mock_upstream, "e2e-breaker") == 5  # closed again: first choice


def test_client_disconnect_mid_stream_frees_upstream(gateway, mock_upstream):
    make_route("chat_completion", "slow", mock_upstream.base_url("chat_completion", "frame-delay=0.5"))
    _, secret = make_key()
    gateway.wait_config()
    before = mock_upstream.stats()["client_disconnects"]
    with httpx.Client(base_url=gateway.url, timeout=20) as client:
        with client.stream(
            "POST",
            CHAT,
            headers={"authorization": f"Bearer {secret}"},
            json={
                "model": "slow",
                "stream": True,
                "messages": [{"role": "user", "content": "a long slow answer"}],
            },
        ) as response:
            assert response.status_code == 200
            next(response.iter_bytes())  # the first bytes arrived; now leave
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        stats = mock_upstream.stats()
        if stats["client_disconnects"] > before and stats["in_flight"] == 0:
            break
        time.sleep(0.05)
    stats = mock_upstream.stats()
    assert stats["client_disconnects"] > before, stats
    assert stats["in_flight"] == 0, stats


def test_live_reload_reaches_running_server(gateway, mock_upstream):
    _, secret = make_key()
    gateway.wait_config()
    assert ask(gateway, secret, "late-model").status_code == 404
    make_route("chat_completion", "late-model", mock_upstream.base_url("chat_completion"))
    started = time.monotonic()
    deadline = started + 10
    while time.monotonic() < deadline:
        response = ask(gateway, secret, "late-model", "now?")
        if response.status_code == 200:
            break
        time.sleep(0.02)
    assert response.status_code == 200, response.text
    print(f"live reload took {time.monotonic() - started:.3f}s")  # informative; the poll is 0.2 s here


@pytest.mark.parametrize("path", ["/v1/messages?beta=true"])
def test_messages_query_string_and_request_id_header(gateway, mock_upstream, path):
    make_route("messages", "cm", mock_upstream.base_url("messages"))
    _, secret = make_key()
    gateway.wait_config()
    response = gateway.client.post(
        path,
        headers={"x-api-key": secret, "anthropic-version": "2023-06-01"},
        json={"model": "cm", "max_tokens": 50, "messages": [{"role": "user", "content": "hey"}]},
    )
    assert response.status_code == 200, response.text
    assert response.headers["request-id"] == response.headers["x-request-id"]
    assert response.json()["content"][0]["text"] == "Echo: hey"


def test_breaker_state_is_shared_between_workers_through_redis(gateway_factory, mock_upstream):
    import redis

    url = os.environ.get("SPARE_REDIS_URL_FOR_TESTS", "redis://127.0.0.1:6379/13")
    try:
        client = redis.Redis.from_url(url, socket_connect_timeout=1)
        client.ping()
    except redis.RedisError:
        pytest.skip("Redis is not reachable")
    for name in client.scan_iter("gateway:breaker:*"):
        client.delete(name)
    mock_upstream.reset()
    env = {"REDIS_URL": url, "GATEWAY_BREAKER_COOLDOWN_SECONDS": "30"}
    worker_a, worker_b = gateway_factory(env), gateway_factory(env)
    make_route(
        "chat_completion", "shared", mock_upstream.base_url("chat_completion", "status=500"), priority=0
    )
    make_route("chat_completion", "shared", mock_upstream.base_url("chat_completion"), priority=1)
    _, secret = make_key()
    worker_a.wait_config()
    worker_b.wait_config()
    for _ in range(3):
        assert ask(worker_a, secret, "shared").status_code == 200
    assert upstream_hits(mock_upstream, "status=500") == 3  # worker A opened the circuit
    deadline = time.monotonic() + 10
    while (
        not client.hget("gateway:breaker:open", str(_channel_id(mock_upstream)))
        and time.monotonic() < deadline
    ):
        time.sleep(0.05)
    time.sleep(1.0)  # worker B pulls the shared map every 0.5 s
    assert ask(worker_b, secret, "shared").status_code == 200
    assert upstream_hits(mock_upstream, "status=500") == 3  # worker B skipped it without a failure of its own
    for name in client.scan_iter("gateway:breaker:*"):
        client.delete(name)


def _channel_id(mock_upstream) -> int:
    from providers.models import Channel

    return Channel.objects.get(base_url=mock_upstream.base_url("chat_completion", "status=500")).id
