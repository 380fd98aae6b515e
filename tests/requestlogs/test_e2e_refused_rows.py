"""End to end: every /v1 answer leaves one request-log row, a metric increment and an access line,
also the answers given before a pipeline recorder exists: no or a bad key (401), an address off
the key's allow-list (403), a body over the limit (413), an unknown path (404), a wrong method
(405), a body that is not JSON on a non-generation endpoint, the models list. The production
server, real Redis and a real Celery worker write the rows; no row holds the presented secret;
keyless answers beyond the per-worker budget are counted, not written; the admin and the REST
API list rows without a key or a model."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import httpx
import pytest

from tests.e2e.test_observe_metrics import _metrics_once, _sample
from tests.requestlogs.test_e2e_request_logs import start_gateway, wait_rows
from tests.servers import GatewayServer, make_key, make_route

pytestmark = pytest.mark.timeout(300)
KEYLESS_PER_SECOND = 5


@pytest.fixture(scope="module")
def refusing_gateway(django_db_setup, django_db_blocker, celery_worker, capture_redis, tmp_path_factory):
    with django_db_blocker.unblock():
        server = start_gateway(
            tmp_path_factory,
            {
                "REDIS_URL": capture_redis,
                "GATEWAY_MAX_BODY_BYTES": "4096",
                "GATEWAY_LOG_FORMAT": "json",
                "GATEWAY_REQUEST_LOG_KEYLESS_PER_SECOND": str(KEYLESS_PER_SECOND),
            },
        )
    yield server
    server.stop()


@pytest.fixture
def gw(refusing_gateway, celery_worker, mock_upstream, transactional_db, request):
    mock_upstream.reset()
    since = refusing_gateway.log_size()
    yield refusing_gateway
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.failed:
        print(f"\n----- gateway log -----\n{refusing_gateway.log_tail(since)}")


def _metrics(server: GatewayServer) -> str:
    reply = server.client.get("/metrics")
    assert reply.status_code == 200, reply.text
    return reply.text


def _moved(before: str, after: str, name: str, **labels: str) -> float:
    return _sample(after, name, **labels) - _sample(before, name, **labels)


def _one_row(reply: httpx.Response) -> Any:
    """The single row of this answer, by the gateway's own id (echoed as x-request-id)."""
    rid = reply.headers["x-request-id"]
    rows = wait_rows(1, request_id=rid)
    assert len(rows) == 1, (
        f"no request-log row for {reply.request.method} {reply.request.url} -> {reply.status_code}"
    )
    return rows[0]


def _access_line(server: GatewayServer, rid: str) -> dict[str, Any]:
    deadline = time.monotonic() + 10
    while True:
        lines = [
            json.loads(line) for line in server.log_tail(limit=400_000).splitlines() if line.startswith("{")
        ]
        mine = [r for r in lines if r.get("logger") == "gateway.access" and r.get("request_id") == rid]
        if mine or time.monotonic() > deadline:
            assert len(mine) == 1, f"access lines for {rid}: {mine}"
            return mine[0]
        time.sleep(0.1)


def _holds(row: Any, secret: str) -> bool:
    from django.forms.models import model_to_dict

    return secret in json.dumps(model_to_dict(row), default=str) or secret[:12] in json.dumps(
        model_to_dict(row), default=str
    )


def test_missing_and_bad_keys_leave_one_row_each_without_the_secret(gw):
    bad = "sk-" + uuid.uuid4().hex  # looks like a key, matches none
    before = _metrics(gw)
    body = {"model": "m", "messages": [{"role": "user", "content": "x"}]}
    missing = gw.client.post("/v1/chat/completions", json=body)
    wrong = gw.client.post("/v1/chat/completions", json=body, headers={"authorization": f"Bearer {bad}"})
    anthropic = gw.client.post("/v1/messages", json=body, headers={"x-api-key": bad})
    assert [r.status_code for r in (missing, wrong, anthropic)] == [401, 401, 401]
    rows = [_one_row(r) for r in (missing, wrong, anthropic)]
    after = _metrics(gw)  # once the rows exist: a request is counted before its row is handed off
    assert [(r.status, r.http_status, r.error_code) for r in rows] == [("error", 401, "unauthorized")] * 3
    assert [(r.endpoint, r.client_protocol) for r in rows] == [
        ("/v1/chat/completions", "chat_completion"),
        ("/v1/chat/completions", "chat_completion"),
        ("/v1/messages", "messages"),
    ]
    assert all(r.api_key_id is None and r.owner_id is None and r.api_key_name == "" for r in rows)
    assert all(r.client_ip == "127.0.0.1" and r.duration_ms > 0 and r.logical_model == "" for r in rows)
    assert not any(_holds(r, bad) for r in rows)
    assert (
        _moved(before, after, "gateway_requests_total", protocol="chat_completion", model="", status="401")
        == 2
    )
    assert _moved(before, after, "gateway_requests_total", protocol="messages", status="401") == 1
    assert (
        _moved(
            before,
            after,
            "gateway_request_errors_total",
            endpoint="/v1/chat/completions",
            status="401",
            code="unauthorized",
        )
        == 2
    )
    assert _moved(before, after, "gateway_request_duration_seconds_count", protocol="messages") == 1
    line = _access_line(gw, wrong.headers["x-request-id"])
    assert (
        line["status"] == 401
        and line["endpoint"] == "/v1/chat/completions"
        and line["error"].startswith("unauthorized")
        and bad not in json.dumps(line)
    )


def test_a_key_refused_for_its_address_is_logged_with_the_key(gw, mock_upstream):
    make_route("chat_completion", "rr-ip", mock_upstream.base_url("chat_completion"))
    key, secret = make_key("rr-ip", ip_allow=["10.0.0.0/8"])
    gw.wait_config()
    before = _metrics(gw)
    reply = gw.client.post(
        "/v1/chat/completions",
        headers={"authorization": f"Bearer {secret}"},
        json={"model": "rr-ip", "messages": [{"role": "user", "content": "x"}]},
    )
    assert reply.status_code == 403 and reply.json()["error"]["code"] == "ip_not_allowed"
    row = _one_row(reply)
    assert (row.status, row.http_status, row.error_code, row.api_key_id) == (
        "error",
        403,
        "ip_not_allowed",
        key.pk,
    )
    assert row.api_key_name == key.name and row.owner_id == key.owner_id and not _holds(row, secret)
    assert (
        _moved(before, _metrics(gw), "gateway_request_errors_total", code="ip_not_allowed", status="403") == 1
    )
    assert _access_line(gw, row.request_id)["key"] == key.name


def test_a_model_name_with_a_nul_character_is_logged(gw, mock_upstream):
    """PostgreSQL refuses NUL in text: the row of a request naming such a model (an unknown
    one: 404) was refused by the database; it is stored with U+FFFD in its place."""
    key, secret = make_key("rr-nul")
    gw.wait_config()
    reply = gw.client.post(
        "/v1/chat/completions",
        headers={"authorization": f"Bearer {secret}"},
        json={"model": "no\u0000such", "messages": [{"role": "user", "content": "x"}]},
    )
    assert reply.status_code == 404
    row = _one_row(reply)
    assert (row.status, row.http_status, row.logical_model) == ("error", 404, "no\ufffdsuch")
    assert "\x00" not in row.error_message


def test_a_body_over_the_limit_is_logged(gw, mock_upstream):
    key, secret = make_key("rr-big")
    gw.wait_config()
    before = _metrics(gw)
    reply = gw.client.post(
        "/v1/chat/completions",
        headers={"authorization": f"Bearer {secret}"},
        json={"model": "m", "messages": [{"role": "user", "content": "x" * 8000}]},
    )
    assert reply.status_code == 413
    row = _one_row(reply)
    assert (row.http_status, row.error_code, row.api_key_id, row.endpoint) == (
        413,
        "request_too_large",
        key.pk,
        "/v1/chat/completions",
    )
    assert not _holds(row, secret)
    assert _moved(before, _metrics(gw), "gateway_request_errors_total", code="request_too_large") == 1


def test_unknown_paths_and_methods_collapse_to_bounded_labels(gw):
    _, secret = make_key("rr-404")
    gw.wait_config()
    auth = {"authorization": f"Bearer {secret}"}
    before = _metrics(gw)
    replies = [gw.client.post(f"/v1/no-such-{uuid.uuid4().hex}", headers=auth, json={}) for _ in range(2)]
    wrong_method = gw.client.get("/v1/chat/completions", headers=auth)
    assert [r.status_code for r in replies] == [404, 404] and wrong_method.status_code == 405
    rows = [_one_row(r) for r in replies]
    assert [(r.endpoint, r.http_status, r.error_code) for r in rows] == [("other", 404, "not_found")] * 2
    row = _one_row(wrong_method)
    after = _metrics(gw)  # once the rows exist: a request is counted before its row is handed off
    assert (row.endpoint, row.http_status, row.error_code) == (
        "/v1/chat/completions",
        405,
        "method_not_allowed",
    )
    assert (
        _moved(
            before, after, "gateway_request_errors_total", endpoint="other", status="404", code="not_found"
        )
        == 2
    )
    assert "no-such-" not in after  # the raw path is no label


def test_models_list_and_non_generation_endpoints_are_logged(gw, mock_upstream):
    make_route("chat_completion", "rr-models", mock_upstream.base_url("chat_completion"))
    key, secret = make_key("rr-models")
    gw.wait_config()
    auth = {"authorization": f"Bearer {secret}"}
    before = _metrics(gw)
    listed = gw.client.get("/v1/models", headers=auth)
    one = gw.client.get("/v1/models/rr-models", headers=auth)
    keyless = gw.client.get("/v1/models")
    not_json = gw.client.post(
        "/v1/embeddings", headers={**auth, "content-type": "application/json"}, content=b"{not json"
    )
    gemini = gw.client.post(
        "/v1beta/models/rr-models:generateContent", headers={"x-goog-api-key": secret}, content=b"[1, 2"
    )
    assert [r.status_code for r in (listed, one, keyless, not_json, gemini)] == [200, 200, 401, 400, 400]
    rows = [_one_row(r) for r in (listed, one, keyless, not_json, gemini)]
    after = _metrics(gw)  # once the rows exist: a request is counted before its row is handed off
    assert [(r.endpoint, r.status, r.http_status, r.api_key_id) for r in rows] == [
        ("/v1/models", "success", 200, key.pk),
        ("/v1/models/{id}", "success", 200, key.pk),
        ("/v1/models", "error", 401, None),
        ("/v1/embeddings", "error", 400, key.pk),
        ("/v1beta/models/{model}:generateContent", "error", 400, key.pk),
    ]
    assert rows[4].client_protocol == "gemini" and rows[3].error_code == "invalid_request"
    assert (
        _moved(before, after, "gateway_requests_total", protocol="chat_completion", model="", status="200")
        == 2
    )
    assert (
        _moved(
            before,
            after,
            "gateway_request_errors_total",
            endpoint="/v1beta/models/{model}:generateContent",
            protocol="gemini",
            status="400",
        )
        == 1
    )


def test_keyless_flood_is_counted_and_logged_within_the_budget(gw):
    time.sleep(1.2)  # a full bucket
    tag = uuid.uuid4().hex[:16]
    before = _metrics(gw)
    sent = 40
    ids = []
    with httpx.Client(base_url=gw.url, timeout=10) as http:
        for i in range(sent):
            reply = http.post("/v1/chat/completions", json={}, headers={"x-request-id": f"{tag}-{i}"})
            assert reply.status_code == 401
            ids.append(reply.headers["x-gateway-request-id"])
    after = _metrics_once(  # shed answers leave no row to wait for: wait for the last one's count
        gw,
        lambda text: (
            _moved(before, text, "gateway_requests_total", protocol="chat_completion", status="401") >= sent
        ),
    )
    shed = _moved(before, after, "gateway_request_log_shed_total", reason="budget")
    assert _moved(before, after, "gateway_requests_total", protocol="chat_completion", status="401") == sent
    assert shed >= sent - KEYLESS_PER_SECOND * 4  # 40 requests take well under 3 s here
    rows = wait_rows(int(sent - shed), client_request_id__startswith=tag)
    time.sleep(1.0)  # nothing more arrives than the budget let through
    from requestlogs.models import RequestLog

    assert RequestLog.objects.filter(client_request_id__startswith=tag).count() == len(rows) == sent - shed
    assert {r.request_id for r in rows} <= set(ids)
    time.sleep(1.2)  # refill for whatever test runs next


def test_admin_and_rest_list_rows_without_a_key_or_a_model(gw, django_user_model):
    from django.test import Client

    bad = gw.client.post("/v1/chat/completions", json={})
    gone = gw.client.post(f"/v1/unknown-{uuid.uuid4().hex}", json={})
    rows = [_one_row(bad), _one_row(gone)]
    admin_user = django_user_model.objects.create_superuser("rr-admin", "a@example.com", "pw-12345678")
    web = Client()
    web.force_login(admin_user)
    for query in (
        {},
        {"status": "error"},
        {"endpoint": "other"},
        {"q": rows[0].request_id},
        {"model": "x", "api_key": "1"},
        {"api_key__isnull": "True"},
    ):
        page = web.get("/admin/requestlogs/requestlog/", query)
        assert page.status_code == 200, (query, page.status_code)
    page = web.get("/admin/requestlogs/requestlog/", {"endpoint": "other"})
    assert rows[1].request_id in page.content.decode() and rows[0].request_id not in page.content.decode()
    detail = web.get(f"/admin/requestlogs/requestlog/{rows[0].pk}/change/")
    assert detail.status_code == 200
    assert web.get("/admin/requestlogs/requestlog/usage/", {"group": "key"}).status_code == 200
    listed = web.get("/api/request-logs/", {"error_code": "unauthorized", "search": rows[0].request_id})
    assert listed.status_code == 200, listed.content
    (item,) = listed.json()["results"]
    assert (item["api_key"], item["logical_model"], item["endpoint"], item["cost"]) == (
        None,
        "",
        "/v1/chat/completions",
        None,
    )
    assert web.get("/api/request-logs/", {"endpoint": "other"}).json()["count"] >= 1
    assert web.get("/api/request-logs/", {"endpoint": "x" * 300}).status_code == 400
    assert web.get(f"/api/request-logs/{rows[1].request_id}/").json()["endpoint"] == "other"


def test_refused_websocket_handshakes_are_logged(gw):
    from websockets.exceptions import InvalidStatus
    from websockets.sync.client import connect

    key, secret = make_key("rr-ws", ip_allow=["10.0.0.0/8"])
    gw.wait_config()
    url = gw.url.replace("http://", "ws://") + "/v1/responses"
    tags = [uuid.uuid4().hex, uuid.uuid4().hex]
    before = _metrics(gw)
    for tag, auth in zip(tags, ("Bearer sk-gw-wrong-000000000000", f"Bearer {secret}"), strict=True):
        with (
            pytest.raises(InvalidStatus),
            connect(url, additional_headers={"authorization": auth, "x-request-id": tag}),
        ):
            pass
    rows = [wait_rows(1, client_request_id=tag)[0] for tag in tags]
    assert [(r.http_status, r.error_code, r.api_key_id, r.endpoint, r.client_protocol) for r in rows] == [
        (401, "unauthorized", None, "/v1/responses (websocket)", "responses"),
        (403, "ip_not_allowed", key.pk, "/v1/responses (websocket)", "responses"),
    ]
    assert not _holds(rows[1], secret)
    assert (
        _moved(before, _metrics(gw), "gateway_request_errors_total", endpoint="/v1/responses (websocket)")
        == 2
    )
