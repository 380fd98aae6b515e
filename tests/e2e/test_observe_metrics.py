"""/metrics through the production server (multiprocess mode, as ``make run``): counters move
after real requests (SDK and raw HTTP), attempts and failovers are counted by outcome, and the
access line reaches the server log."""

from __future__ import annotations

import json
import re
import time

import httpx
import openai

from tests.servers import make_key, make_route


def _sample(text: str, name: str, **labels: str) -> float:
    """The value of ``name{labels...}`` in the exposition text (0 when absent)."""
    total = 0.0
    for line in text.splitlines():
        if not line.startswith(name + "{"):
            continue
        got = dict(re.findall(r'(\w+)="([^"]*)"', line[: line.rindex("}") + 1]))
        if all(got.get(k) == v for k, v in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total


def _metrics(server) -> str:
    reply = server.client.get("/metrics")
    assert reply.status_code == 200, reply.text
    assert reply.headers["content-type"].startswith("text/plain")
    return reply.text


def _metrics_once(server, done) -> str:
    """The exposition once ``done(text)`` holds (up to 5 s). A request is counted when its
    worker finishes it, which can be just after the client has read the last byte (a stream's
    end), and ``/metrics`` may be answered by the other worker meanwhile."""
    deadline = time.monotonic() + 5
    text = _metrics(server)
    while not done(text) and time.monotonic() < deadline:
        time.sleep(0.05)
        text = _metrics(server)
    return text


def test_requests_latency_tokens_and_attempts_are_counted(gateway, mock_upstream):
    from gateway import config_version

    route = make_route(
        "chat_completion",
        "obs-ok",
        mock_upstream.base_url("chat_completion"),
        provider_name="obs-prov",
        channel_name="obs-chan",
    )
    route.channel_model.price = {"input": "1000000", "output": "2000000"}  # 1 and 2 USD per token
    route.channel_model.save()
    config_version.bump()
    _, secret = make_key("obs")
    gateway.wait_config()
    before = _metrics(gateway)
    oa = openai.OpenAI(base_url=gateway.url + "/v1", api_key=secret, max_retries=0)
    for _ in range(3):
        oa.chat.completions.create(model="obs-ok", messages=[{"role": "user", "content": "hi"}])
    stream = oa.chat.completions.create(
        model="obs-ok",
        messages=[{"role": "user", "content": "hi"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    assert list(stream)
    labels = {
        "protocol": "chat_completion",
        "model": "obs-ok",
        "provider": "obs-prov",
        "channel": "obs-chan",
        "status": "200",
    }

    def requests(text: str) -> float:
        return _sample(text, "gateway_requests_total", **labels) - _sample(
            before, "gateway_requests_total", **labels
        )

    after = _metrics_once(gateway, lambda text: requests(text) >= 4)
    assert requests(after) == 4
    for name in ("gateway_request_duration_seconds_count", "gateway_time_to_first_byte_seconds_count"):
        moved = _sample(after, name, protocol="chat_completion") - _sample(
            before, name, protocol="chat_completion"
        )
        assert moved >= 4, name
    assert (
        _sample(after, "gateway_time_to_first_byte_seconds_count", protocol="chat_completion", stream="true")
        - _sample(
            before, "gateway_time_to_first_byte_seconds_count", protocol="chat_completion", stream="true"
        )
    ) == 1
    ok = {"provider": "obs-prov", "channel": "obs-chan", "outcome": "ok"}
    assert (
        _sample(after, "gateway_upstream_attempts_total", **ok)
        - _sample(before, "gateway_upstream_attempts_total", **ok)
        == 4
    )
    moved_tokens = {}
    for kind in ("input", "output"):
        moved_tokens[kind] = _sample(after, "gateway_tokens_total", model="obs-ok", kind=kind) - _sample(
            before, "gateway_tokens_total", model="obs-ok", kind=kind
        )
        assert moved_tokens[kind] > 0
    cost = _sample(after, "gateway_cost_usd_total", model="obs-ok") - _sample(
        before, "gateway_cost_usd_total", model="obs-ok"
    )
    assert cost == moved_tokens["input"] * 1 + moved_tokens["output"] * 2
    assert "gateway_breaker_state{" in after and 'channel="obs-chan"' in after
    assert 'gateway_queue_depth{queue="captures"}' in after


def test_failover_and_failed_attempts_are_counted(gateway, mock_upstream):
    make_route(
        "chat_completion",
        "obs-fo",
        mock_upstream.base_url("chat_completion", "status=500"),
        provider_name="obs-bad",
        channel_name="obs-bad-chan",
        priority=0,
        channel_max_retries=0,
    )
    make_route(
        "chat_completion",
        "obs-fo",
        mock_upstream.base_url("chat_completion"),
        provider_name="obs-good",
        channel_name="obs-good-chan",
        priority=10,
    )
    _, secret = make_key("obs-fo")
    gateway.wait_config()
    before = _metrics(gateway)
    reply = gateway.client.post(
        "/v1/chat/completions",
        headers={"authorization": f"Bearer {secret}"},
        json={"model": "obs-fo", "messages": [{"role": "user", "content": "hi"}]},
    )
    assert reply.status_code == 200, reply.text
    counted = {"model": "obs-fo", "channel": "obs-good-chan", "status": "200"}
    after = _metrics_once(
        gateway,
        lambda text: (
            _sample(text, "gateway_requests_total", **counted)
            > _sample(before, "gateway_requests_total", **counted)
        ),
    )

    def moved(name, **labels):
        return _sample(after, name, **labels) - _sample(before, name, **labels)

    assert moved("gateway_upstream_attempts_total", channel="obs-bad-chan", outcome="retryable") == 1
    assert moved("gateway_upstream_attempts_total", channel="obs-good-chan", outcome="ok") == 1
    assert moved("gateway_upstream_failovers_total", provider="obs-good", channel="obs-good-chan") == 1
    assert moved("gateway_requests_total", **counted) == 1


def test_unknown_models_do_not_grow_label_values_without_bound(gateway, mock_upstream):
    _, secret = make_key("obs-404")
    gateway.wait_config()
    reply = gateway.client.post(
        "/v1/chat/completions",
        headers={"authorization": f"Bearer {secret}"},
        json={"model": "no-such-model-xyz", "messages": [{"role": "user", "content": "hi"}]},
    )
    assert reply.status_code == 404

    def unknown(text: str) -> float:
        return _sample(text, "gateway_requests_total", model="no-such-model-xyz", status="404")

    assert unknown(_metrics_once(gateway, lambda text: unknown(text) >= 1)) >= 1


def test_json_access_line_per_request(gateway_factory, mock_upstream):
    make_route("chat_completion", "obs-log", mock_upstream.base_url("chat_completion"))
    _, secret = make_key("obs-log")
    server = gateway_factory({"GATEWAY_LOG_FORMAT": "json"})
    server.wait_config()
    reply = server.client.post(
        "/v1/chat/completions",
        headers={"authorization": f"Bearer {secret}"},
        json={"model": "obs-log", "messages": [{"role": "user", "content": "hi"}]},
    )
    assert reply.status_code == 200
    rid = reply.headers["x-request-id"]
    deadline = time.monotonic() + 10  # the line is written once the answer is out: poll for it
    while True:
        lines = [json.loads(line) for line in server.log_tail().splitlines() if line.startswith("{")]
        mine = [
            row for row in lines if row.get("logger") == "gateway.access" and row.get("request_id") == rid
        ]
        if mine or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert len(mine) == 1, server.log_tail()
    row = mine[0]
    assert row["level"] == "INFO" and row["protocol"] == "chat_completion" and row["model"] == "obs-log"
    assert row["status"] == 200 and row["attempts"] == 1 and row["duration_ms"] > 0
    assert row["input_tokens"] is not None and row["error"] is None


def test_every_scrape_sums_every_worker(gateway_factory, mock_upstream):
    """Two uvicorn workers in multiprocess mode: requests land on both (each worker writes its own
    files in PROMETHEUS_MULTIPROC_DIR), and whichever worker answers a scrape reports them all."""
    from pathlib import Path

    make_route("chat_completion", "obs-workers", mock_upstream.base_url("chat_completion"))
    _, secret = make_key("obs-workers")
    server = gateway_factory(workers=2)
    server.wait_config()
    headers = {"authorization": f"Bearer {secret}"}
    body = {"model": "obs-workers", "messages": [{"role": "user", "content": "hi"}]}
    pids: set[str] = set()
    sent = 0
    deadline = time.monotonic() + 60
    while len(pids) < 2 or sent < 20:
        # a new connection each time, so the kernel spreads them over both workers' accept queues
        reply = httpx.post(f"{server.url}/v1/chat/completions", headers=headers, json=body, timeout=20)
        assert reply.status_code == 200, reply.text
        sent += 1
        pids = {p.stem.rsplit("_", 1)[1] for p in Path(server.metrics_dir).glob("counter_*.db")}
        assert time.monotonic() < deadline, f"requests never reached both workers: {pids}"
    for _ in range(6):  # scrapes on fresh connections, answered by either worker
        text = httpx.get(f"{server.url}/metrics", timeout=10).text
        assert _sample(text, "gateway_requests_total", model="obs-workers", status="200") == sent
