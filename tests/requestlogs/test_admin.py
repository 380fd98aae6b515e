"""The admin: changelist filters (the reference's query parameters and the list filters), exact
totals of the filtered rows, the capture link, bad filter values as a message (not a 500), and
the usage summary by day and model per key and per owner with its SVG chart."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from keys.models import ApiKey
from requestlogs import store
from tests.requestlogs.test_api import T0, row

pytestmark = pytest.mark.django_db
DAY = 86400.0


@pytest.fixture
def web(django_user_model):
    admin = django_user_model.objects.create_superuser("root", "r@example.com", "pw-12345678")
    client = Client()
    client.force_login(admin)
    return client


@pytest.fixture
def keys(django_user_model):
    alice = django_user_model.objects.create_user("alice", password="pw-12345678")
    out = []
    for name, owner in (("ka", alice), ("kb", None)):
        k = ApiKey(name=name, owner=owner)
        k.set_secret()
        k.save()
        out.append(k)
    return out


def totals(html: str) -> dict[str, str]:
    return dict(re.findall(r'data-total="(\w+)">([^<]*)<', html))


def test_changelist_totals_follow_the_filters_exactly(web, keys):
    ka, kb = keys
    store.save_rows(
        [
            row("a1", ka, cost_nano=100_000_000_001, input_tokens=5),
            row("a2", ka, logical_model="claude-x", upstream_model="claude-x", cost_nano=1, input_tokens=7),
            row("b1", kb, cost_nano=None, status="error", http_status=502, input_tokens=11),
        ]
    )
    page = web.get("/admin/requestlogs/requestlog/")
    assert page.status_code == 200
    assert totals(page.content.decode()) == {
        "requests": "3",
        "input_tokens": "23",
        "output_tokens": "15",
        "cache_read_tokens": "0",
        "cache_write_tokens": "0",
        "reasoning_tokens": "0",
        "cost": "100.000000002",
    }
    page = web.get("/admin/requestlogs/requestlog/", {"model": "gpt", "api_key": str(ka.pk)})
    assert totals(page.content.decode())["requests"] == "1" and "a1" in page.content.decode()
    page = web.get("/admin/requestlogs/requestlog/", {"status__exact": "error"})
    assert totals(page.content.decode())["input_tokens"] == "11"
    page = web.get("/admin/requestlogs/requestlog/", {"status__exact": "success"})
    assert totals(page.content.decode())["input_tokens"] == "12"
    page = web.get("/admin/requestlogs/requestlog/", {"q": "10.0.0"})
    assert totals(page.content.decode())["requests"] == "3"


def test_bad_filter_values_are_a_message_not_an_error(web, keys):
    store.save_rows([row("a1", keys[0])])
    page = web.get("/admin/requestlogs/requestlog/", {"api_key": str(2**64), "time_from": "soon"})
    assert page.status_code == 200
    assert "api_key" in page.content.decode() and totals(page.content.decode())["requests"] == "0"


def test_capture_link_only_when_a_capture_was_recorded(web, keys):
    store.save_rows([row("with", keys[0], x_request_id="echo-1", has_capture=True), row("without", keys[0])])
    html = web.get("/admin/requestlogs/requestlog/").content.decode()
    assert html.count('href="/captures/with/"') == 1 and "/captures/echo-1/" not in html


def test_usage_by_day_and_model_per_key_and_owner(web, keys):
    ka, kb = keys
    store.save_rows(
        [
            row(
                "d1a",
                ka,
                created_at=T0,
                logical_model="m1",
                cost_nano=1_000,
                input_tokens=10,
                output_tokens=1,
            ),
            row(
                "d1b",
                ka,
                created_at=T0 + 60,
                logical_model="m1",
                cost_nano=2_000,
                input_tokens=20,
                output_tokens=2,
            ),
            row("d1c", kb, created_at=T0 + 120, logical_model="<b>m2</b>", cost_nano=500),
            row("d2a", ka, created_at=T0 + DAY, logical_model="m1", cost_nano=7),
        ]
    )
    params = {"time_from": "2026-05-28T00:00:00Z", "time_to": "2026-05-30T00:00:00Z", "metric": "cost"}
    page = web.get("/admin/requestlogs/requestlog/usage/", params)
    assert page.status_code == 200
    html = page.content.decode()
    table = re.findall(
        r"<tr><td>([\d-]+)</td><td>([^<]*)</td><td>([^<]*)</td><td>(\d+)</td><td>(\d+)</td>"
        r"<td>(\d+)</td><td>([\d.]+)</td></tr>",
        html,
    )
    assert table == [
        ("2026-05-28", "&lt;b&gt;m2&lt;/b&gt;", "kb", "1", "10", "5", "0.000000500"),
        ("2026-05-28", "m1", "ka", "2", "30", "3", "0.000003000"),
        ("2026-05-29", "m1", "ka", "1", "10", "5", "0.000000007"),
    ]
    bars = re.findall(r'data-day="([\d-]+)" data-model="([^"]*)" data-value="(\d+)"', html)
    assert sorted(bars) == [
        ("2026-05-28", "&lt;b&gt;m2&lt;/b&gt;", "500"),
        ("2026-05-28", "m1", "3000"),
        ("2026-05-29", "m1", "7"),
    ]
    assert "<b>m2</b>" not in html  # the model name is escaped everywhere, in the chart too
    owners = web.get("/admin/requestlogs/requestlog/usage/", {**params, "group": "owner", "metric": "tokens"})
    html = owners.content.decode()
    assert "<td>alice</td>" in html and "<td>(none)</td>" in html
    assert re.search(r'data-day="2026-05-28" data-model="m1" data-value="33"', html)  # 30 input + 3 output
    bad = web.get("/admin/requestlogs/requestlog/usage/", {"owner": "-3"})
    assert bad.status_code == 200 and "owner" in bad.content.decode()


def sqlite_plan(qs) -> str:
    """SQLite's query plan for the first page of ``qs``, as one line."""
    from django.db import connection

    sql, params = qs[:50].query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN QUERY PLAN " + sql, params)
        return " ".join(str(step[-1]) for step in cursor.fetchall())


def test_a_failure_status_filter_uses_the_partial_status_index(keys):
    """Only failures are in the status index (every success insert skips it); a lookup of a
    failure status must still find its rows through it rather than scan the table."""
    from django.db import connection

    from requestlogs import filters
    from requestlogs.models import RequestLog

    store.save_rows([row("ok1", keys[0]), row("bad1", keys[0], status="error", http_status=502)])
    for status, ids in (("error", ["bad1"]), ("success", ["ok1"])):
        qs = filters.apply(RequestLog.objects.all(), {"status": status})
        assert [r.request_id for r in qs] == ids
    if connection.vendor != "sqlite":
        return
    assert "reqlog_unsuccessful" in sqlite_plan(
        filters.apply(RequestLog.objects.all(), {"status": "client_gone"})
    )


def test_owner_lookups_use_the_partial_owner_index(keys, django_user_model):
    """The owner index holds only rows with an owner (a key without one adds no entry); the
    owner filter, the username filter and a non-staff user's own rows still come from it."""
    from django.db import connection

    from requestlogs import filters
    from requestlogs.models import RequestLog

    owned = [k for k in keys if k.owner_id is not None][0]
    store.save_rows([row("mine", owned)])
    user = django_user_model.objects.get(pk=owned.owner_id)
    assert [r.request_id for r in RequestLog.objects.visible_to(user)] == ["mine"]
    if connection.vendor != "sqlite":
        return
    for qs in (
        filters.apply(RequestLog.objects.all(), {"owner": str(user.pk)}, staff=True),
        filters.apply(RequestLog.objects.all(), {"username": user.username}, staff=True),
        RequestLog.objects.visible_to(user),
    ):
        plan = sqlite_plan(qs)
        assert "reqlog_owner_created" in plan, plan
