"""The REST API over request logs: filters as the reference (model terms, status, key, owner,
time range, search), newest first, paging with exact totals, owners see only their own rows,
and bad filter values are 400s naming the parameter."""

from __future__ import annotations

import time
from decimal import Decimal

import pytest
from rest_framework.test import APIClient

from keys.models import ApiKey
from requestlogs import store
from requestlogs.models import RequestLog

pytestmark = pytest.mark.django_db
T0 = 1_780_000_000.0  # 2026-05-28T20:26:40Z


def row(rid: str, key: ApiKey | None = None, **fields) -> dict:
    base = {
        "request_id": rid,
        "x_request_id": rid,
        "created_at": T0,
        "api_key_id": key.pk if key else None,
        "api_key_name": key.name if key else "",
        "client_protocol": "chat_completion",
        "stream": False,
        "client_ip": "10.0.0.7",
        "logical_model": "gpt-4o",
        "upstream_model": "gpt-4o-2024",
        "provider": "p",
        "channel": "c",
        "attempts": [{"provider": "p", "channel": "c", "status": 200, "duration_ms": 1.0}],
        "input_tokens": 10,
        "output_tokens": 5,
        "cost_nano": 123,
        "status": "success",
        "http_status": 200,
        "duration_ms": 3.5,
    }
    base.update(fields)
    return base


@pytest.fixture
def data(django_user_model):
    alice = django_user_model.objects.create_user("alice", password="pw-12345678")
    bob = django_user_model.objects.create_user("bob", password="pw-12345678")
    staff = django_user_model.objects.create_user("staff", password="pw-12345678", is_staff=True)
    ka = ApiKey(name="ka", owner=alice)
    ka.set_secret()
    ka.save()
    kb = ApiKey(name="kb", owner=bob)
    kb.set_secret()
    kb.save()
    store.save_rows(
        [
            row("r1", ka, created_at=T0, logical_model="gpt-4o", cost_nano=1_000_000_001),
            row(
                "r2",
                ka,
                created_at=T0 + 60,
                logical_model="claude-sonnet-4",
                upstream_model="claude-x",
                status="error",
                http_status=502,
                cost_nano=None,
                error_code="upstream_error",
            ),
            row(
                "r3",
                kb,
                created_at=T0 + 120,
                logical_model="gpt_4o-mini",
                client_ip="192.168.1.9",
                cost_nano=2_999_999_999,
                input_tokens=7,
            ),
            row(
                "r4",
                kb,
                created_at=T0 + 180,
                logical_model="o3",
                upstream_model="o3-x",
                status="client_gone",
                http_status=499,
            ),
        ]
    )
    return {"alice": alice, "bob": bob, "staff": staff, "ka": ka, "kb": kb}


def get(user, params=None, path="/api/request-logs/"):
    client = APIClient()
    if user is not None:
        client.force_authenticate(user)
    return client.get(path, params or {})


def ids(resp) -> list[str]:
    return [r["request_id"] for r in resp.data["results"]]


def test_staff_see_all_rows_newest_first_with_exact_totals(data):
    resp = get(data["staff"])
    assert resp.status_code == 200 and ids(resp) == ["r4", "r3", "r2", "r1"]
    assert resp.data["count"] == 4
    t = resp.data["totals"]
    assert t["requests"] == 4 and t["input_tokens"] == 10 + 10 + 7 + 10
    assert t["cost"] == "4.000000123"  # 1.000000001 + 2.999999999 + 0.000000123: exact
    first = resp.data["results"][-1]
    assert first["cost"] == "1.000000001" and first["http_status"] == 200 and first["provider"] == "p"
    assert first["attempts"][0]["status"] == 200 and first["input_tokens"] == 10


def test_owners_see_only_their_own_keys_rows(data):
    assert ids(get(data["alice"])) == ["r2", "r1"]
    assert ids(get(data["bob"], {"owner": str(data["alice"].pk)})) == [
        "r4",
        "r3",
    ]  # staff-only filter ignored
    assert get(None).status_code in (401, 403)
    assert get(data["bob"], path="/api/request-logs/r1/").status_code == 404
    assert get(data["alice"], path="/api/request-logs/r1/").data["request_id"] == "r1"


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"model": "GPT"}, ["r3", "r1"]),
        ({"model": "claude, o3"}, ["r4", "r2"]),
        ({"model": "gpt_4"}, ["r3"]),  # "_" is literal, not a wildcard
        ({"model": "claude-x"}, ["r2"]),  # the upstream model too
        ({"status": "error"}, ["r2"]),
        ({"status": "client_gone"}, ["r4"]),
        ({"time_from": "2026-05-28T20:27:40Z"}, ["r4", "r3", "r2"]),
        (
            {"time_from": "2026-05-28T20:27:40Z", "time_to": "2026-05-28T20:29:40Z"},
            ["r3", "r2"],
        ),  # to: exclusive
        ({"time_to": "2026-05-28T22:27:40+02:00"}, ["r1"]),
        ({"search": "192.168"}, ["r3"]),
        ({"search": "r2"}, ["r2"]),
        ({"username": "alice"}, ["r2", "r1"]),
    ],
)
def test_filters(data, params, expected):
    resp = get(data["staff"], params)
    assert resp.status_code == 200, resp.data
    assert ids(resp) == expected


def test_key_and_owner_filters_and_paging(data):
    assert ids(get(data["staff"], {"api_key": str(data["kb"].pk)})) == ["r4", "r3"]
    assert ids(get(data["staff"], {"owner": str(data["alice"].pk)})) == ["r2", "r1"]
    resp = get(data["staff"], {"limit": "1", "offset": "1"})
    assert ids(resp) == ["r3"] and resp.data["count"] == 4 and resp.data["totals"]["requests"] == 4


@pytest.mark.parametrize(
    ("params", "param"),
    [
        ({"api_key": str(2**63)}, "api_key"),
        ({"api_key": "-1"}, "api_key"),
        ({"owner": "x"}, "owner"),
        ({"time_from": "yesterday"}, "time_from"),
        ({"time_from": "9999-12-31T23:59:59-05:00"}, "time_from"),  # overflows when moved to UTC
        ({"time_to": "99999-01-01"}, "time_to"),
        ({"time_from": "2026-01-02", "time_to": "2026-01-01"}, "time_from"),
        ({"status": "ok"}, "status"),
        ({"model": ",".join(f"m{i}" for i in range(33))}, "model"),
        ({"limit": "0"}, "limit"),
        ({"offset": "x"}, "offset"),
    ],
)
def test_bad_filter_values_are_400s_naming_the_parameter(data, params, param):
    resp = get(data["staff"], params)
    assert resp.status_code == 400 and param in resp.data


def test_detail_by_gateway_id_or_echoed_request_id(data):
    store.save_rows([row("gw-own-id", data["ka"], x_request_id="client-chosen", created_at=time.time())])
    assert get(data["staff"], path="/api/request-logs/gw-own-id/").data["x_request_id"] == "client-chosen"
    assert get(data["staff"], path="/api/request-logs/client-chosen/").data["request_id"] == "gw-own-id"
    assert get(data["staff"], path="/api/request-logs/nope/").status_code == 404


def test_writes_are_idempotent_by_request_id(data):
    store.save_rows([row("r1", data["ka"], input_tokens=999), row("r9", data["ka"])])
    assert RequestLog.objects.get(request_id="r1").input_tokens == 10  # the first write stands
    assert RequestLog.objects.filter(request_id="r9").count() == 1
    assert RequestLog.objects.get(request_id="r9").owner_id == data["alice"].pk
    assert RequestLog.objects.get(request_id="r1").cost == Decimal("1.000000001")
