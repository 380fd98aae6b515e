"""End to end: the production gateway (uvicorn) writes one request-log row per generation
request through a real Redis and a real Celery worker: success (with a cost computed by hand
from the usage the mock reported), failover, stream, client disconnect, rejected requests, an
estimate for a stream without usage; the admin's totals match the rows; a Redis outage loses no
row."""

from __future__ import annotations

import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from tests.minute_window import wait_for_fresh_minute
from tests.servers import GatewayServer, make_key, make_route

pytestmark = pytest.mark.timeout(300)
NANO = Decimal("0.000000001")


def wait_rows(count: int, timeout: float = 60, **filters: Any) -> list:
    """Poll until ``count`` rows match (the worker writes them asynchronously)."""
    from requestlogs.models import RequestLog

    deadline = time.monotonic() + timeout
    while True:
        rows = list(RequestLog.objects.filter(**filters).order_by("created_at", "id"))
        if len(rows) >= count or time.monotonic() > deadline:
            return rows
        time.sleep(0.1)


def start_gateway(tmp_path_factory, env: dict[str, str]) -> GatewayServer:
    data_dir = tmp_path_factory.mktemp("gateway-data")
    return GatewayServer(
        {"GATEWAY_DATA_DIR": str(data_dir), "GATEWAY_REQUEST_LOG_RETRY_SECONDS": "0.5", **env},
        name="gateway-requestlogs",
    ).start()


@pytest.fixture(scope="module")
def rl_gateway(django_db_setup, django_db_blocker, celery_worker, capture_redis, tmp_path_factory):
    with django_db_blocker.unblock():
        server = start_gateway(tmp_path_factory, {"REDIS_URL": capture_redis})
    yield server
    server.stop()


@pytest.fixture
def gw(rl_gateway, celery_worker, mock_upstream, transactional_db, request):
    mock_upstream.reset()
    since = rl_gateway.log_size()
    yield rl_gateway
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.failed:
        print(f"\n----- gateway log -----\n{rl_gateway.log_tail(since)}")
        print(f"\n----- celery log -----\n{celery_worker.log()[-5000:]}")


def client_for(server: GatewayServer, secret: str, **kw: Any) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.url + "/v1", api_key=secret, max_retries=0, timeout=30, **kw)


def priced_route(mock_upstream, model: str, *, fault: str = "", **kw: Any):
    route = make_route(
        "chat_completion",
        model,
        mock_upstream.base_url("chat_completion", fault),
        upstream_model=f"up-{model}",
        **kw,
    )
    route.channel_model.price = {
        "input": "3.00",
        "output": "15.00",
        "cache_read": "0.30",
        "cache_write": "3.75",
    }
    route.channel_model.multiplier = Decimal("1.5")
    route.channel_model.save()
    route.provider.multiplier = Decimal("2")
    route.provider.save()
    from gateway import config_version

    config_version.bump()
    return route


def test_success_row_with_the_cost_of_the_reported_usage(gw, mock_upstream):
    priced_route(mock_upstream, "rl-ok")
    key, secret = make_key("rl-ok")
    gw.wait_config()
    client = client_for(gw, secret, default_headers={"x-request-id": "client-id-1"})
    reply = client.chat.completions.create(model="rl-ok", messages=[{"role": "user", "content": "price me"}])
    (row,) = wait_rows(1, api_key=key)
    assert (row.status, row.http_status, row.error_code) == ("success", 200, "")
    assert (row.logical_model, row.upstream_model, row.client_protocol, row.stream) == (
        "rl-ok",
        "up-rl-ok",
        "chat_completion",
        False,
    )
    assert row.client_request_id == "client-id-1" and row.x_request_id == "client-id-1"
    assert row.request_id != "client-id-1" and len(row.request_id) == 32  # the gateway's own id
    assert row.api_key_name == key.name and row.client_ip == "127.0.0.1"
    assert (row.input_tokens, row.output_tokens) == (reply.usage.prompt_tokens, reply.usage.completion_tokens)
    # by hand: (input * 3.00 + output * 15.00) USD per million tokens, times 1.5 (model) and 2 (provider)
    expected = (
        (
            Decimal(reply.usage.prompt_tokens) * Decimal("3.00")
            + Decimal(reply.usage.completion_tokens) * Decimal("15.00")
        )
        * 3
        / Decimal(10**6)
    )
    assert row.cost == expected.quantize(NANO) and not row.cost_estimated
    assert row.duration_ms > 0 and row.ttfb_ms is not None and row.ttfb_ms <= row.duration_ms
    assert [a["status"] for a in row.attempts] == [200] and "error" not in row.attempts[0]


def test_behind_a_trusted_proxy_the_row_names_the_forwarded_client(gw, mock_upstream):
    """The test client connects from loopback, a trusted proxy by default: its X-Forwarded-For
    names the client the row records (the last hop the proxy appended, not one a client claimed
    before it)."""
    priced_route(mock_upstream, "rl-fwd")
    key, secret = make_key("rl-fwd")
    gw.wait_config()
    client = client_for(gw, secret, default_headers={"x-forwarded-for": "192.0.2.99, 203.0.113.7"})
    client.chat.completions.create(model="rl-fwd", messages=[{"role": "user", "content": "hi"}])
    (row,) = wait_rows(1, api_key=key)
    assert row.client_ip == "203.0.113.7"
    # a proxy that writes no address (``unknown``) names nobody: the row is stored without one
    # (on PostgreSQL the inet column refused the text, and the row was spooled, then dead-lettered)
    client = client_for(gw, secret, default_headers={"x-forwarded-for": "unknown"})
    client.chat.completions.create(model="rl-fwd", messages=[{"role": "user", "content": "hi"}])
    rows = wait_rows(2, api_key=key)
    assert len(rows) == 2 and rows[1].client_ip is None and rows[1].status == "success"


def test_failover_keeps_each_attempt_with_its_error_and_duration(gw, mock_upstream):
    make_route(
        "chat_completion",
        "rl-fo",
        mock_upstream.base_url("chat_completion", "status=500"),
        provider_name="rl-broken",
        priority=0,
    )
    make_route(
        "chat_completion",
        "rl-fo",
        mock_upstream.base_url("chat_completion"),
        provider_name="rl-good",
        priority=1,
    )
    key, secret = make_key("rl-fo")
    gw.wait_config()
    client_for(gw, secret).chat.completions.create(model="rl-fo", messages=[{"role": "user", "content": "x"}])
    (row,) = wait_rows(1, api_key=key)
    assert row.status == "success" and row.provider == "rl-good"
    assert [a["provider"] for a in row.attempts] == ["rl-broken", "rl-good"]
    first = row.attempts[0]
    assert first["status"] == 500 and first["error"] and first["duration_ms"] >= 0
    assert row.cost is None  # no price on this route: logged, not priced


def test_all_attempts_failing_is_an_error_row_without_cost(gw, mock_upstream):
    priced_route(mock_upstream, "rl-down", fault="status=503")
    key, secret = make_key("rl-down")
    gw.wait_config()
    with pytest.raises(openai.APIStatusError) as info:
        client_for(gw, secret).chat.completions.create(
            model="rl-down", messages=[{"role": "user", "content": "x"}]
        )
    (row,) = wait_rows(1, api_key=key)
    assert row.status == "error" and row.http_status == info.value.status_code and row.error_code
    assert row.cost_nano is None and row.attempts[0]["status"] == 503


def test_stream_row_has_the_final_usage_and_a_time_to_first_byte(gw, mock_upstream):
    priced_route(mock_upstream, "rl-stream")
    key, secret = make_key("rl-stream")
    gw.wait_config()
    stream = client_for(gw, secret).chat.completions.create(
        model="rl-stream",
        messages=[{"role": "user", "content": "stream it"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    usage = None
    for chunk in stream:
        usage = chunk.usage or usage
    (row,) = wait_rows(1, api_key=key)
    assert row.stream and row.status == "success" and row.http_status == 200
    assert (row.input_tokens, row.output_tokens) == (usage.prompt_tokens, usage.completion_tokens)
    expected = (Decimal(usage.prompt_tokens) * 3 + Decimal(usage.completion_tokens) * 15) * 3 / Decimal(10**6)
    assert row.cost == expected.quantize(NANO) and not row.cost_estimated
    assert row.ttfb_ms is not None


def test_a_client_that_leaves_mid_stream_is_client_gone(gw, mock_upstream):
    priced_route(mock_upstream, "rl-gone", fault="frame-delay=0.3")
    key, secret = make_key("rl-gone")
    gw.wait_config()
    body = {
        "model": "rl-gone",
        "stream": True,
        "messages": [{"role": "user", "content": "a rather long answer please, many words"}],
    }
    with (
        httpx.Client(timeout=30) as http,
        http.stream(
            "POST", gw.url + "/v1/chat/completions", json=body, headers={"authorization": f"Bearer {secret}"}
        ) as resp,
    ):
        assert resp.status_code == 200
        next(resp.iter_raw())  # the first bytes, then hang up
    (row,) = wait_rows(1, api_key=key)
    assert (row.status, row.http_status, row.error_code) == ("client_gone", 499, "client_gone")
    assert row.attempts and row.attempts[-1]["code"] == "client_gone"
    assert row.cost_estimated and row.cost_nano is not None and row.input_tokens > 0  # billable, estimated


def test_rejected_requests_are_logged_with_their_status(gw, mock_upstream):
    make_route("chat_completion", "rl-allowed", mock_upstream.base_url("chat_completion"))
    key, secret = make_key("rl-reject", allowed_models=["rl-allowed"])
    gw.wait_config()
    client = client_for(gw, secret)
    with pytest.raises(openai.PermissionDeniedError):
        client.chat.completions.create(model="rl-secret", messages=[{"role": "user", "content": "x"}])
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model="rl-allowed", messages="not a list")
    rows = wait_rows(2, api_key=key)
    assert [(r.status, r.http_status, r.error_code) for r in rows] == [
        ("error", 403, "model_not_allowed"),
        ("error", 400, "invalid_request"),
    ]
    assert all(r.cost_nano is None and r.attempts == [] for r in rows)


def test_a_limit_refusal_is_an_error_row_with_429(gw, mock_upstream):
    make_route("chat_completion", "rl-limited", mock_upstream.base_url("chat_completion"))
    key, secret = make_key("rl-limited", limits={"rpm": 1})
    gw.wait_config()
    wait_for_fresh_minute()
    client = client_for(gw, secret)
    client.chat.completions.create(model="rl-limited", messages=[{"role": "user", "content": "one"}])
    with pytest.raises(openai.RateLimitError):
        client.chat.completions.create(model="rl-limited", messages=[{"role": "user", "content": "two"}])
    rows = wait_rows(2, api_key=key)
    assert [(r.status, r.http_status, r.error_code) for r in rows] == [
        ("success", 200, ""),
        ("error", 429, "rate_limit_exceeded"),
    ]
    assert rows[1].attempts == [] and rows[1].cost_nano is None


def test_stream_that_breaks_after_its_first_bytes_is_an_error_row(gw, mock_upstream):
    priced_route(mock_upstream, "rl-broken", fault="disconnect-after=3")
    key, secret = make_key("rl-broken")
    gw.wait_config()
    stream = client_for(gw, secret).chat.completions.create(
        model="rl-broken", messages=[{"role": "user", "content": "a long answer please"}], stream=True
    )
    with pytest.raises(openai.APIError):
        for _ in stream:
            pass
    (row,) = wait_rows(1, api_key=key)
    assert row.status == "error" and row.http_status == 200 and row.error_code
    assert row.cost_nano is None


def test_admin_totals_match_the_rows(gw, mock_upstream, django_user_model):
    from django.test import Client

    from requestlogs.models import RequestLog

    priced_route(mock_upstream, "rl-sum-a")
    priced_route(mock_upstream, "rl-sum-b")
    key, secret = make_key("rl-sum")
    gw.wait_config()
    client = client_for(gw, secret)
    for i, model in enumerate(["rl-sum-a", "rl-sum-b", "rl-sum-a"]):
        client.chat.completions.create(
            model=model, messages=[{"role": "user", "content": "words " * (i + 1)}]
        )
    rows = wait_rows(3, api_key=key)
    assert len(rows) == 3
    admin_user = django_user_model.objects.create_superuser("rl-admin", "a@example.com", "pw-12345678")
    web = Client()
    web.force_login(admin_user)
    page = web.get("/admin/requestlogs/requestlog/", {"model": "rl-sum-a", "api_key": str(key.pk)})
    assert page.status_code == 200
    html = page.content.decode()
    want = [r for r in rows if r.logical_model == "rl-sum-a"]
    assert f'data-total="requests">{len(want)}<' in html
    assert f'data-total="input_tokens">{sum(r.input_tokens for r in want)}<' in html
    total_cost = sum((r.cost for r in want), Decimal(0))
    assert f'data-total="cost">{total_cost.quantize(NANO)}<' in html
    assert RequestLog.objects.filter(api_key=key).count() == 3


def test_redis_outage_loses_no_row(mock_upstream, transactional_db, private_redis, tmp_path_factory):
    from tests.captures.conftest import CeleryWorker

    mock_upstream.reset()
    make_route("chat_completion", "rl-outage", mock_upstream.base_url("chat_completion"))
    key, secret = make_key("rl-outage")
    worker = CeleryWorker(private_redis.url).start()
    server = start_gateway(tmp_path_factory, {"REDIS_URL": private_redis.url})
    spool = Path(server.env["GATEWAY_DATA_DIR"]) / "requestlog-spool"
    try:
        server.wait_config()
        client = client_for(server, secret)
        client.chat.completions.create(model="rl-outage", messages=[{"role": "user", "content": "before"}])
        assert len(wait_rows(1, api_key=key)) == 1
        private_redis.stop()
        for _ in range(3):
            client.chat.completions.create(
                model="rl-outage", messages=[{"role": "user", "content": "during"}]
            )

        def spooled() -> int:  # a file being retried is renamed to .claim<pid> meanwhile
            return len(list(spool.glob("*.row"))) + len(list(spool.glob("*.claim*")))

        # The three, and the row published last before the outage: spooled again, as the broker
        # may have lost it (HandOff.resend_seconds); it is stored once.
        deadline = time.monotonic() + 30
        while spooled() < 4 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert spooled() == 4, "rows were not spooled while Redis was down"
        private_redis.start()
        rows = wait_rows(4, timeout=120, api_key=key)
        assert len(rows) == 4, f"rows not persisted after Redis returned:\n{server.log_tail()[-3000:]}"
        assert spooled() == 0
    finally:
        server.stop()
        worker.stop()
