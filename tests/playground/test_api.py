"""``POST /api/playground/``: the dry run over the stored configuration plus unsaved rule edits.

Real built-in transforms (prompt_inject_system, field_set...), the real codecs and the real
``build_attempt``; nothing is sent upstream unless ``send`` is asked for (then the bundled mock
upstream answers)."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from tests.servers import make_key, make_route

URL = "/api/playground/"
BODY = {"model": "gpt-play", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 16}


@pytest.fixture
def api(admin_user) -> APIClient:
    client = APIClient()
    client.force_authenticate(admin_user)
    return client


@pytest.fixture
def setup(db):
    from transforms.models import TransformRule

    route = make_route(
        "chat_completion",
        "gpt-play",
        "http://127.0.0.1:9/v1",
        upstream_model="gpt-up",
        upstream_key="sk-upstream-secret-123456",
    )
    other = make_route("messages", "claude-x", "http://127.0.0.1:9", provider_name="other")
    key, _ = make_key("play")
    rules = {
        "inject": TransformRule.objects.create(
            scope="provider",
            provider=route.provider,
            position=0,
            transform="prompt_inject_system",
            phase="request",
            config={"content": "Be brief.", "position": "prepend"},
        ),
        "disabled": TransformRule.objects.create(
            scope="global",
            position=1,
            transform="field_set",
            enabled=False,
            phase="request",
            config={"path": "temperature", "value": 0.1},
        ),
        "glob": TransformRule.objects.create(
            scope="global",
            position=2,
            transform="field_set",
            phase="request",
            models=["claude-*"],
            config={"path": "temperature", "value": 0.2},
        ),
        "other_provider": TransformRule.objects.create(
            scope="provider",
            provider=other.provider,
            position=0,
            transform="role_merge_consecutive",
            phase="request",
        ),
        "keyrule": TransformRule.objects.create(
            scope="api_key",
            api_key=key,
            position=0,
            transform="field_strip_sampling",
            phase="request",
            config={"fields": ["temperature"]},
        ),
    }
    return route, key, rules


def _rule(report, rid):
    return next(r for r in report["rules"] if r["rule_id"] == rid)


def test_dry_run_reports_routing_rules_diffs_and_upstream_request(api, setup):
    route, key, rules = setup
    resp = api.post(URL, {"protocol": "chat_completion", "body": BODY}, format="json")
    assert resp.status_code == 200, resp.content
    rep = resp.json()
    assert rep["error"] is None
    assert rep["routing"]["provider"] == route.provider.name
    assert rep["routing"]["channel"] == route.channel.name
    assert rep["routing"]["upstream_model"] == "gpt-up"
    assert _rule(rep, rules["inject"].pk)["status"] == "runs"
    assert _rule(rep, rules["disabled"].pk)["reason"] == "disabled"
    assert _rule(rep, rules["glob"].pk)["reason"].startswith("glob:")
    assert _rule(rep, rules["other_provider"].pk)["reason"].startswith("scope:")
    assert _rule(rep, rules["keyrule"].pk)["reason"].startswith("scope:")  # no key chosen
    chain = rep["request_chain"]
    assert [(s["ordinal"], s["transform"], s["scope"], s["phase"]) for s in chain] == [
        (1, "prompt_inject_system", "provider", "request")
    ]
    assert chain[0]["changed"] is True
    added = [c for c in chain[0]["changes"] if c["op"] == "added"]
    assert any("Be brief." in str(c["new"]) for c in added)
    upstream = rep["upstream"]
    assert upstream["url"] == "http://127.0.0.1:9/v1/chat/completions"
    assert upstream["body"]["messages"][0] == {"role": "system", "content": "Be brief."}
    assert upstream["body"]["model"] == "gpt-up"
    assert upstream["headers"]["authorization"] == "***"
    assert "sk-upstream-secret-123456" not in resp.content.decode()


def test_key_chain_runs_for_the_chosen_key(api, setup):
    _, key, rules = setup
    rep = api.post(
        URL,
        {"protocol": "chat_completion", "body": {**BODY, "temperature": 0.7}, "api_key": key.pk},
        format="json",
    ).json()
    assert _rule(rep, rules["keyrule"].pk)["status"] == "runs"
    assert [s["scope"] for s in rep["request_chain"]] == ["provider", "api_key"]
    assert "temperature" not in rep["upstream"]["body"]
    change = rep["request_chain"][1]["changes"][0]
    assert change["path"].endswith("temperature") and change["old"] == 0.7 and change["new"] is None
    unchanged = api.post(
        URL, {"protocol": "chat_completion", "api_key": key.pk, "states": False, "body": BODY}, format="json"
    ).json()
    assert [s["changed"] for s in unchanged["request_chain"]] == [True, False]


def test_unsaved_edit_changes_the_result_without_saving(api, setup):
    _, _, rules = setup
    edit = {"id": rules["inject"].pk, "config": {"content": "Answer in French.", "position": "append"}}
    rep = api.post(URL, {"protocol": "chat_completion", "body": BODY, "rules": [edit]}, format="json").json()
    messages = rep["upstream"]["body"]["messages"]
    assert messages[-1] == {"role": "system", "content": "Answer in French."} or "Answer in French." in str(
        messages
    )
    assert "Be brief." not in str(messages)
    assert _rule(rep, rules["inject"].pk)["edited"] is True
    rules["inject"].refresh_from_db()
    assert rules["inject"].config["content"] == "Be brief."  # nothing written
    # Enabling the disabled rule and a new, unsaved global rule.
    rep = api.post(
        URL,
        {
            "protocol": "chat_completion",
            "body": BODY,
            "rules": [
                {"id": rules["disabled"].pk, "enabled": True},
                {
                    "scope": "global",
                    "transform": "field_set",
                    "phase": "request",
                    "position": 5,
                    "config": {"path": "top_p", "value": 0.5},
                },
            ],
        },
        format="json",
    ).json()
    assert rep["upstream"]["body"]["temperature"] == 0.1
    assert rep["upstream"]["body"]["top_p"] == 0.5
    assert [s["transform"] for s in rep["request_chain"]] == [
        "prompt_inject_system",
        "field_set",
        "field_set",
    ]


def test_rule_not_allowed_in_its_scope_is_named(api, setup):
    _, key, _ = setup
    from transforms.models import TransformRule

    bad = TransformRule.objects.create(
        scope="api_key",
        api_key=key,
        position=1,
        transform="field_set",
        phase="request",
        config={"path": "temperature", "value": 0.3},
    )
    rep = api.post(
        URL, {"protocol": "chat_completion", "body": BODY, "api_key": key.pk}, format="json"
    ).json()
    assert _rule(rep, bad.pk)["reason"] == "field_set is not allowed in the api_key scope"


def test_invalid_edit_is_a_400_naming_the_field(api, setup):
    _, _, rules = setup
    resp = api.post(
        URL,
        {
            "protocol": "chat_completion",
            "body": BODY,
            "rules": [{"id": rules["inject"].pk, "config": {"position": "sideways"}}],
        },
        format="json",
    )
    assert resp.status_code == 400
    errors = resp.json()["errors"]["rules"]["0"]
    assert "config" in errors


def test_errors_are_reported_by_stage(api, setup):
    rep = api.post(
        URL, {"protocol": "chat_completion", "body": {**BODY, "model": "nope"}}, format="json"
    ).json()
    assert rep["error"]["stage"] == "routing" and rep["error"]["code"] == "model_not_found"
    rep = api.post(URL, {"protocol": "chat_completion", "body": {"messages": "x"}}, format="json").json()
    assert rep["error"]["stage"] == "decode"
    resp = api.post(URL, {"protocol": "chat_completion", "body": "{not json"}, format="json")
    assert resp.status_code == 400 and "body" in resp.json()["errors"]
    resp = api.post(URL, {"protocol": "grpc", "body": BODY}, format="json")
    assert resp.status_code == 400 and "protocol" in resp.json()["errors"]


def test_key_policy_is_applied(api, db):
    make_route("chat_completion", "gpt-play", "http://127.0.0.1:9/v1")
    key, _ = make_key("limited", allowed_models=["other-*"])
    rep = api.post(
        URL, {"protocol": "chat_completion", "body": BODY, "api_key": key.pk}, format="json"
    ).json()
    assert rep["error"]["stage"] == "policy"


def test_refused_for_anonymous_and_non_staff(db, client, django_user_model):
    assert client.post(URL, {}, content_type="application/json").status_code in (401, 403)
    user = django_user_model.objects.create_user("u", password="p")
    api = APIClient()
    api.force_authenticate(user)
    assert api.post(URL, {"body": BODY}, format="json").status_code == 403


def test_send_for_real_shows_the_response_side(api, db, mock_upstream):
    from transforms.models import TransformRule

    route = make_route(
        "chat_completion", "gpt-real", mock_upstream.base_url("chat_completion"), upstream_model="mock-model"
    )
    TransformRule.objects.create(
        scope="global",
        position=0,
        transform="prompt_inject_system",
        phase="request",
        config={"content": "Be brief."},
    )
    rep = api.post(
        URL,
        {
            "protocol": "messages",
            "send": True,
            "body": {
                "model": "gpt-real",
                "max_tokens": 20,
                "messages": [{"role": "user", "content": "hello"}],
            },
        },
        format="json",
    ).json()
    sent = rep["sent"]
    assert sent["error"] is None, sent
    assert sent["status"] == 200
    assert sent["client_response"]["type"] == "message"  # the messages client's answer
    assert sent["client_response"]["model"] == "gpt-real"
    assert sent["urp_response_after"]["model"]
    assert route.provider.name == rep["routing"]["provider"]


def test_admin_page_is_linked_and_staff_only(admin_client, client, setup):
    index = admin_client.get("/admin/").content.decode()
    assert 'href="/admin/playground/"' in index
    page = admin_client.get("/admin/playground/")
    assert page.status_code == 200
    html = page.content.decode()
    assert 'id="pg-boot"' in html and "gpt-play" in html and "/api/playground/" in html
    assert "sk-upstream-secret-123456" not in html
    assert client.get("/admin/playground/").status_code == 302  # to the admin login
