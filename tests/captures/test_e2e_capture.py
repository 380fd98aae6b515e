"""End to end: the production gateway (uvicorn) hands captures to a real Celery worker through a
real Redis; the rows land in the test database. Also: abnormal-only capture, stream frames,
truncation counters, and a Redis outage (private redis-server) that the client never notices."""

from __future__ import annotations

import time
from typing import Any

import openai
import orjson
import pytest

from tests.servers import GatewayServer, make_key, make_route

pytestmark = pytest.mark.timeout(240)


def wait_captures(count: int, timeout: float = 60, **filters: Any) -> list:
    """Poll until ``count`` captures match (the worker writes them asynchronously)."""
    from captures.models import Capture

    deadline = time.monotonic() + timeout
    while True:
        rows = list(Capture.objects.filter(**filters).order_by("created_at", "id"))
        if len(rows) >= count or time.monotonic() > deadline:
            return rows
        time.sleep(0.1)


def dump(cap) -> dict[str, Any]:
    return orjson.loads(cap.dump_bytes())


def start_gateway(tmp_path_factory, env: dict[str, str]) -> GatewayServer:
    data_dir = tmp_path_factory.mktemp("gateway-data")
    return GatewayServer(
        {"GATEWAY_DATA_DIR": str(data_dir), "GATEWAY_CAPTURE_RETRY_SECONDS": "0.5", **env},
        name="gateway-captures",
    ).start()


@pytest.fixture(scope="module")
def capture_gateway(django_db_setup, django_db_blocker, celery_worker, capture_redis, tmp_path_factory):
    with django_db_blocker.unblock():
        server = start_gateway(tmp_path_factory, {"REDIS_URL": capture_redis})
    yield server
    server.stop()


@pytest.fixture
def gw(capture_gateway, celery_worker, mock_upstream, transactional_db, request):
    mock_upstream.reset()
    since = capture_gateway.log_size()
    yield capture_gateway
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.failed:
        print(f"\n----- gateway log -----\n{capture_gateway.log_tail(since)}")
        print(f"\n----- celery log -----\n{celery_worker.log()[-5000:]}")


def client_for(server: GatewayServer, secret: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.url + "/v1", api_key=secret, max_retries=0, timeout=30)


def inject_rule(provider, globs: list[str]):
    from gateway import config_version
    from transforms.models import TransformRule

    rule = TransformRule.objects.create(
        scope="provider",
        provider=provider,
        position=0,
        transform="prompt_inject_system",
        phase="request",
        models=globs,
        config={"content": "Answer in French.", "position": "prepend"},
    )
    config_version.bump()
    return rule


def test_matching_rule_is_captured_with_its_chain_and_effect(gw, mock_upstream):
    route = make_route(
        "chat_completion", "capgpt-4o", mock_upstream.base_url("chat_completion"), upstream_model="up-4o"
    )
    make_route(
        "chat_completion",
        "plain-model",
        mock_upstream.base_url("chat_completion"),
        provider=route.provider,
        upstream_model="up-plain",
    )
    rule = inject_rule(route.provider, ["capgpt-*"])
    key, secret = make_key("cap-all", capture_mode="all")
    gw.wait_config()
    client = client_for(gw, secret)
    reply = client.chat.completions.create(model="capgpt-4o", messages=[{"role": "user", "content": "hi"}])
    assert reply.choices[0].message.content
    client.chat.completions.create(model="plain-model", messages=[{"role": "user", "content": "hi"}])

    matched, plain = wait_captures(2, api_key=key)
    assert (matched.logical_model, plain.logical_model) == ("capgpt-4o", "plain-model")
    assert matched.client_protocol == "chat_completion" and matched.status == 200 and not matched.is_error
    d = dump(matched)
    att = d["attempts"][0]
    assert d["client_request"]["messages"] == [{"role": "user", "content": "hi"}]
    assert att["upstream_request"]["model"] == "up-4o"
    assert att["upstream_request"]["messages"][0] == {"role": "system", "content": "Answer in French."}
    assert {
        "scope": "provider",
        "transform": "prompt_inject_system",
        "phase": "request",
        "rule_id": rule.pk,
    } in att["executed_chain"]
    assert att["upstream_response"]["choices"] and d["client_response"]["choices"]
    assert att["started_at"] and att["ttfb_ms"] is not None and d["duration_ms"] > 0
    assert "Answer in French." not in orjson.dumps(att["executed_chain"]).decode()

    p = dump(plain)["attempts"][0]
    assert all(e["transform"] != "prompt_inject_system" for e in p["executed_chain"])
    assert [m["role"] for m in p["upstream_request"]["messages"]] == ["user"]


def test_abnormal_mode_keeps_only_failing_or_retried_requests(gw, mock_upstream):
    make_route("chat_completion", "abn-ok", mock_upstream.base_url("chat_completion"))
    make_route(
        "chat_completion",
        "abn-retry",
        mock_upstream.base_url("chat_completion", "status=500"),
        priority=0,
        provider_name="abn-broken",
    )
    make_route(
        "chat_completion",
        "abn-retry",
        mock_upstream.base_url("chat_completion"),
        priority=1,
        provider_name="abn-good",
    )
    make_route("chat_completion", "abn-fail", mock_upstream.base_url("chat_completion", "status=400"))
    key, secret = make_key("cap-abnormal", capture_mode="abnormal")
    gw.wait_config()
    client = client_for(gw, secret)
    client.chat.completions.create(model="abn-ok", messages=[{"role": "user", "content": "fine"}])
    client.chat.completions.create(model="abn-retry", messages=[{"role": "user", "content": "retried"}])
    with pytest.raises(openai.APIStatusError):
        client.chat.completions.create(model="abn-fail", messages=[{"role": "user", "content": "failed"}])
    # The writer sends in order and the solo worker consumes in order: once both abnormal ones
    # are stored, a capture of the normal request would be stored too.
    rows = wait_captures(2, api_key=key)
    assert [r.logical_model for r in rows] == ["abn-retry", "abn-fail"]
    retried, failed = rows
    assert retried.attempt_count == 2 and retried.status == 200
    attempts = dump(retried)["attempts"]
    assert [a["provider"] for a in attempts] == ["abn-broken", "abn-good"]
    assert attempts[0]["upstream_status"] == 500 and attempts[0]["error"]
    assert failed.is_error and failed.status >= 400


def test_stream_capture_holds_the_frames(gw, mock_upstream):
    make_route("chat_completion", "cap-stream", mock_upstream.base_url("chat_completion"))
    key, secret = make_key("cap-stream", capture_mode="all")
    gw.wait_config()
    stream = client_for(gw, secret).chat.completions.create(
        model="cap-stream", messages=[{"role": "user", "content": "stream me"}], stream=True
    )
    text = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
    assert text
    (cap,) = wait_captures(1, api_key=key)
    assert cap.stream
    d = dump(cap)
    assert d["client_frames"] and "".join(d["client_frames"]).rstrip().endswith("data: [DONE]")
    att = d["attempts"][0]
    assert att["upstream_frames"] and att["response_after_chains"]
    assert d["capture_truncation"]["truncated"] is False


def test_stream_that_fails_after_its_first_bytes_is_captured_as_an_error(gw, mock_upstream):
    make_route(
        "chat_completion", "cap-broken", mock_upstream.base_url("chat_completion", "disconnect-after=3")
    )
    key, secret = make_key("cap-broken", capture_mode="abnormal")
    gw.wait_config()
    stream = client_for(gw, secret).chat.completions.create(
        model="cap-broken", messages=[{"role": "user", "content": "a long answer please"}], stream=True
    )
    with pytest.raises(openai.APIError):
        for _ in stream:
            pass
    (cap,) = wait_captures(1, api_key=key)
    assert cap.status == 200 and cap.is_error  # the 200 went out before the upstream broke
    assert "upstream_stream_incomplete" in dump(cap)["error"]


def test_truncation_counters(gw, mock_upstream, tmp_path_factory, capture_redis):
    make_route("chat_completion", "cap-trunc", mock_upstream.base_url("chat_completion"))
    key, secret = make_key("cap-trunc", capture_mode="all")
    small = start_gateway(tmp_path_factory, {"REDIS_URL": capture_redis, "GATEWAY_CAPTURE_MAX_FRAMES": "2"})
    try:
        small.wait_config()
        stream = client_for(small, secret).chat.completions.create(
            model="cap-trunc",
            messages=[{"role": "user", "content": "a fairly long answer please"}],
            stream=True,
        )
        assert "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
    finally:
        small.stop()
    (cap,) = wait_captures(1, api_key=key)
    d = dump(cap)
    assert cap.truncated and d["capture_truncation"]["truncated"] is True
    assert len(d["client_frames"]) == 2 and len(d["attempts"][0]["upstream_frames"]) == 2
    assert d["capture_truncation"]["omitted_frames"] > 0 and d["capture_truncation"]["omitted_bytes"] > 0


def test_redis_outage_never_touches_the_client_and_the_capture_arrives_later(
    mock_upstream, transactional_db, private_redis, tmp_path_factory, django_db_blocker
):
    from tests.captures.conftest import CeleryWorker

    mock_upstream.reset()
    make_route("chat_completion", "cap-outage", mock_upstream.base_url("chat_completion"))
    key, secret = make_key("cap-outage", capture_mode="all")
    worker = CeleryWorker(private_redis.url).start()
    server = start_gateway(tmp_path_factory, {"REDIS_URL": private_redis.url})
    spool = server.env["GATEWAY_DATA_DIR"] + "/capture-spool"
    try:
        server.wait_config()
        client = client_for(server, secret)
        client.chat.completions.create(model="cap-outage", messages=[{"role": "user", "content": "before"}])
        assert len(wait_captures(1, api_key=key)) == 1

        private_redis.stop()
        reply = client.chat.completions.create(
            model="cap-outage", messages=[{"role": "user", "content": "during"}]
        )
        assert reply.choices[0].message.content  # the client got its answer
        deadline = time.monotonic() + 30
        from pathlib import Path

        while not list(Path(spool).glob("*.cap")) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert list(Path(spool).glob("*.cap")), "the capture was not spooled while Redis was down"

        private_redis.start()
        rows = wait_captures(2, timeout=120, api_key=key)
        assert len(rows) == 2, f"capture not persisted after Redis returned:\n{server.log_tail()[-3000:]}"
        assert dump(rows[1])["client_request"]["messages"][0]["content"] == "during"
        assert not list(Path(spool).glob("*.cap"))
    finally:
        server.stop()
        worker.stop()
