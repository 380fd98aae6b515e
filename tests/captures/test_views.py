"""The viewer and the REST API: access rules (same 404 for absent and forbidden), filters,
detail content and raw download."""

from __future__ import annotations

import time

import orjson
import pytest
from django.contrib.auth.models import Permission, User

from keys.models import ApiKey
from tests.captures.helpers import record, stored

pytestmark = pytest.mark.django_db


def user_with_perm(name: str, *, staff: bool = False) -> User:
    user = User.objects.create_user(name, password="pw", is_staff=staff)
    user.user_permissions.add(Permission.objects.get(codename="view_capture"))
    return user


def make_key(name: str, owner: User | None) -> ApiKey:
    key = ApiKey(name=name, owner=owner)
    key.set_secret()
    key.save()
    return key


@pytest.fixture
def people():
    alice, bob = user_with_perm("alice"), user_with_perm("bob")
    staff = user_with_perm("auditor", staff=True)
    return alice, bob, staff, make_key("alice-key", alice), make_key("bob-key", bob)


def test_login_and_permission_are_required(client, people):
    alice, *_ = people
    r = client.get("/captures/")
    assert r.status_code == 302 and r["Location"].startswith("/captures/login/")
    nobody = User.objects.create_user("nobody", password="pw")
    client.force_login(nobody)
    assert client.get("/captures/").status_code == 403


def test_forbidden_and_missing_give_the_same_404(client, people):
    alice, bob, staff, akey, bkey = people
    stored(record("shared-id", key=bkey))
    client.force_login(alice)
    forbidden = client.get("/captures/shared-id/")
    missing = client.get("/captures/no-such-id/")
    assert forbidden.status_code == missing.status_code == 404
    assert client.get("/captures/raw/shared-id").status_code == 404
    client.force_login(bob)
    assert client.get("/captures/shared-id/").status_code == 200
    client.force_login(staff)
    assert client.get("/captures/shared-id/").status_code == 200


def test_same_request_id_serves_the_newest_visible(client, people):
    alice, bob, staff, akey, bkey = people
    stored(record("dup", key=akey, logical_model="alice-model"), created_at=time.time() - 60)
    stored(record("dup", key=bkey, logical_model="bob-model"))
    client.force_login(alice)
    assert b"alice-model" in client.get("/captures/dup/").content
    client.force_login(staff)
    assert b"bob-model" in client.get("/captures/dup/").content


def test_list_shows_only_own_captures_newest_first(client, people):
    alice, bob, staff, akey, bkey = people
    now = time.time()
    stored(record("a-old", key=akey), created_at=now - 100)
    stored(record("a-new", key=akey), created_at=now)
    stored(record("b-1", key=bkey), created_at=now - 50)
    client.force_login(alice)
    ids = [c.request_id for c in client.get("/captures/").context["page"]]
    assert ids == ["a-new", "a-old"]
    client.force_login(staff)
    assert [c.request_id for c in client.get("/captures/").context["page"]] == ["a-new", "b-1", "a-old"]


def test_list_filters(client, people):
    alice, bob, staff, akey, bkey = people
    now = time.time()
    stored(record("r1", key=akey, logical_model="gpt-4o"), created_at=now - 3600)
    stored(
        record("r2", key=bkey, logical_model="claude-3", client_protocol="messages", stream=True),
        created_at=now,
    )
    stored(record("r3", key=akey, logical_model="gpt-4o-mini", status=502), created_at=now - 10)
    client.force_login(staff)

    def ids(query: str) -> list[str]:
        return [c.request_id for c in client.get("/captures/?" + query).context["page"]]

    assert ids(f"key={akey.pk}") == ["r3", "r1"]
    assert ids("model=gpt-4o") == ["r3", "r1"] and ids("model=claude") == ["r2"]
    assert ids("protocol=messages") == ["r2"]
    assert ids("status=5xx") == ["r3"] and ids("status=200") == ["r2", "r1"]
    assert ids("errors=1") == ["r3"]
    from datetime import UTC, datetime

    since = datetime.fromtimestamp(now - 60, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    assert ids(f"since={since}") == ["r2", "r3"]
    assert ids(f"until={since}") == ["r1"]
    assert ids("status=nonsense&key=x") == ["r2", "r3", "r1"]  # unparseable filters are ignored


def test_list_is_paginated(client, people):
    *_, staff, akey, _ = people
    now = time.time()
    for n in range(55):
        stored(record(f"p{n:02d}", key=akey), created_at=now - n)
    client.force_login(staff)
    page1 = client.get("/captures/").context["page"]
    page2 = client.get("/captures/?page=2").context["page"]
    assert len(page1) == 50 and len(page2) == 5 and page2[4].request_id == "p54"


def test_detail_shows_chain_tabs_and_diff(client, people):
    alice, bob, staff, akey, bkey = people
    stored(record("d1", key=akey, attempts=2))
    client.force_login(staff)
    r = client.get("/captures/d1/")
    html = r.content.decode()
    assert r.status_code == 200
    assert 'class="chip scope-provider"' in html and "prompt_inject_system" in html
    assert "hidden system transform" not in html
    client.force_login(alice)
    r = client.get("/captures/d1/")
    html = r.content.decode()
    for title in (
        "Client request",
        "Upstream request",
        "Upstream response",
        "Client response",
        "Client request → upstream request",
    ):
        assert title in html
    assert 'class="ln add"' in html and "Answer in French." in html
    assert "secret judge key" not in html
    assert r.context["attempt_index"] == 2 and len(r.context["attempts"]) == 2
    r = client.get("/captures/d1/?attempt=1")
    assert r.context["attempt_index"] == 1 and r.context["attempt"]["upstream_status"] == 500


def test_raw_download_is_the_dump(client, people):
    alice, *_, akey, _ = people
    stored(record("raw-1", key=akey))
    client.force_login(alice)
    r = client.get("/captures/raw/raw-1")
    assert r.status_code == 200 and "attachment" in r["Content-Disposition"]
    doc = orjson.loads(r.content)
    assert doc["request_id"] == "raw-1" and doc["attempts"][0]["upstream_request"]["model"] == "up-4o"


def test_rest_api_for_staff_only(client, people):
    alice, bob, staff, akey, bkey = people
    stored(record("api-1", key=akey, logical_model="gpt-4o"))
    stored(record("api-2", key=bkey, logical_model="claude"))
    client.force_login(alice)
    assert client.get("/api/captures/").status_code == 403
    client.force_login(staff)
    body = client.get("/api/captures/?model=claude").json()
    assert [c["request_id"] for c in body["results"]] == ["api-2"]
    detail = client.get("/api/captures/api-1/").json()
    assert detail["dump"]["attempts"][0]["executed_chain"][0]["transform"] == "prompt_inject_system"
    assert client.get("/api/captures/missing/").status_code == 404


def test_key_admin_links_to_its_captures(client, people):
    *_, akey, _ = people
    admin = User.objects.create_superuser("root", password="pw")
    client.force_login(admin)
    html = client.get(f"/admin/keys/apikey/{akey.pk}/change/").content.decode()
    assert f"/captures/?key={akey.pk}" in html


def test_detail_of_a_request_without_attempts_or_with_placeholders(client, people):
    from captures.bounds import Budget, Limits

    alice, *_, akey, _ = people
    rec = record("none", key=akey, attempts=0, status=404)
    rec.error = "model_not_found: Model not found: nope"
    rec.attempts.clear()
    stored(rec)
    big = record("big", key=akey, budget=Budget(Limits(max_bytes=8 * 1024)))
    big.attempts[0].upstream_response = {"blob": "z" * 30000}
    stored(big)
    client.force_login(alice)
    html = client.get("/captures/none/").content.decode()
    assert "no upstream attempt" in html and "model_not_found" in html
    r = client.get("/captures/big/")
    assert r.status_code == 200 and "Not recorded (attempt truncated)." in r.content.decode()
    assert "This capture was truncated" in r.content.decode()


def test_stream_detail_lists_frames_and_diffs_events(client, people):
    alice, *_, akey, _ = people
    rec = record("s1", key=akey, stream=True)
    rec.attempts[0].upstream_response = None
    rec.attempts[0].upstream_frames.append('{"choices":[{"delta":{"content":"Bon"}}]}')
    rec.client_frames.append('data: {"choices":[{"delta":{"content":"Bon"}}]}\n\ndata: [DONE]\n\n')
    rec.client_response = None
    stored(rec)
    client.force_login(alice)
    r = client.get("/captures/s1/")
    html = r.content.decode()
    assert "Upstream stream" in html and "Client stream" in html and "2 frames" in html
    diff = [t for t in r.context["tabs"] if t["id"] == "diff-1"][0]["diff"]
    assert [(c.op, c.path) for c in diff.changes] == [("added", "$[1]")]  # the [DONE] sentinel


def test_key_owner_sees_own_key_rules_and_a_hidden_count(client, people):
    alice, bob, staff, akey, bkey = people
    rec = record("own", key=akey)
    rec.attempts[0].executed_chain = [
        {"scope": "provider", "transform": "prompt_inject_system", "phase": "request", "rule_id": 1},
        {"scope": "global", "transform": "role_merge_consecutive", "phase": "request", "rule_id": 2},
        {"scope": "api_key", "transform": "field_strip_sampling", "phase": "request", "rule_id": 3},
    ]
    stored(rec)
    client.force_login(alice)
    r = client.get("/captures/own/")
    assert [c["transform"] for c in r.context["chain"]] == ["field_strip_sampling"]
    assert r.context["hidden_transforms"] == 2 and "2 hidden system transforms" in r.content.decode()
    raw = orjson.loads(client.get("/captures/raw/own").content)["attempts"][0]
    assert [c["transform"] for c in raw["executed_chain"]] == ["field_strip_sampling"]
    assert raw["hidden_transforms"] == 2
    client.force_login(staff)
    r = client.get("/captures/own/")
    assert len(r.context["chain"]) == 3 and r.context["hidden_transforms"] == 0
    assert len(orjson.loads(client.get("/captures/raw/own").content)["attempts"][0]["executed_chain"]) == 3
