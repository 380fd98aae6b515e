"""REST API: staff only; CRUD with nested channels; write-only upstream keys; API key secrets
once; rules validated per scope; settings singleton; field-level errors, never 500."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from gateway import crypto
from gateway.models import GlobalSettings
from keys.models import ApiKey
from providers.models import Channel, Provider
from transforms.models import TransformRule

pytestmark = pytest.mark.django_db


@pytest.fixture
def api(admin_user) -> APIClient:
    client = APIClient()
    client.force_authenticate(admin_user)
    return client


def _provider_doc(**overrides):
    doc = {
        "name": "openai-main",
        "priority": 2,
        "channels": [
            {
                "name": "primary",
                "protocol": "chat_completion",
                "base_url": "http://127.0.0.1:9100/v1",
                "api_key": "sk-up-secret-1",
                "weight": 1,
                "models": [{"model": "gpt-4o", "upstream_model": "gpt-4o-2024-08-06", "multiplier": "1.50"}],
            }
        ],
    }
    doc.update(overrides)
    return doc


def test_anonymous_and_non_staff_are_refused(db, client):
    assert APIClient().get("/api/providers/").status_code in (401, 403)
    user = get_user_model().objects.create_user("bob", password="pw-123456789")
    c = APIClient()
    c.force_authenticate(user)
    assert c.get("/api/providers/").status_code == 403


def test_token_auth_for_staff(admin_user):
    token = Token.objects.create(user=admin_user)
    c = APIClient()
    c.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    assert c.get("/api/providers/").status_code == 200


def test_provider_crud_with_nested_channels(api):
    r = api.post("/api/providers/", _provider_doc(), format="json")
    assert r.status_code == 201, r.json()
    body = r.json()
    assert "sk-up-secret-1" not in r.content.decode()
    channel = body["channels"][0]
    assert channel["has_api_key"] is True and "api_key" not in channel
    assert channel["models"][0]["multiplier"] == "1.5"
    pid, cid = body["id"], channel["id"]
    assert Channel.objects.get(pk=cid).get_api_key() == "sk-up-secret-1"

    # Update: empty key keeps the stored one; a second channel is added; models replaced.
    doc = _provider_doc(priority=5)
    doc["channels"][0].update(api_key="", models=[{"model": "gpt-4o-mini"}])
    doc["channels"].append(
        {
            "name": "backup",
            "protocol": "responses",
            "base_url": "http://127.0.0.1:9100/v1",
            "api_key": "sk-up-secret-2",
        }
    )
    r = api.put(f"/api/providers/{pid}/", doc, format="json")
    assert r.status_code == 200, r.json()
    assert "sk-up-secret" not in r.content.decode()
    assert Channel.objects.get(pk=cid).get_api_key() == "sk-up-secret-1"
    channels = {c["name"]: c for c in r.json()["channels"]}
    assert [m["model"] for m in channels["primary"]["models"]] == ["gpt-4o-mini"]
    assert channels["primary"]["id"] == cid and channels["backup"]["has_api_key"] is True
    assert Provider.objects.get(pk=pid).priority == 5

    # PATCH without channels leaves them alone; GET never shows a key.
    r = api.patch(f"/api/providers/{pid}/", {"enabled": False}, format="json")
    assert r.status_code == 200 and len(r.json()["channels"]) == 2
    listing = api.get("/api/providers/")
    assert listing.status_code == 200 and "sk-up-secret" not in listing.content.decode()
    detail = api.get(f"/api/providers/{pid}/").content.decode()
    assert "sk-up-secret" not in detail
    assert Channel.objects.get(pk=cid).api_key_encrypted not in detail

    # Dropping a channel from the list deletes it.
    doc["channels"] = doc["channels"][:1]
    assert api.put(f"/api/providers/{pid}/", doc, format="json").status_code == 200
    assert list(Channel.objects.values_list("name", flat=True)) == ["primary"]

    assert api.delete(f"/api/providers/{pid}/").status_code == 204
    assert not Provider.objects.exists() and not Channel.objects.exists()


def test_provider_field_level_errors(api):
    doc = _provider_doc()
    doc["channels"][0].update(protocol="grpc", base_url="ftp://x")
    r = api.post("/api/providers/", doc, format="json")
    assert r.status_code == 400
    assert set(r.json()["channels"]["0"]) == {"protocol", "base_url"}
    assert not Provider.objects.exists()

    doc = _provider_doc()
    doc["channels"][0]["base_url"] = "ftp://x"
    r = api.post("/api/providers/", doc, format="json")
    assert r.status_code == 400 and "base_url" in r.json()["channels"]["0"]
    assert not Provider.objects.exists()

    doc = _provider_doc()
    del doc["channels"][0]["api_key"]  # a keyless channel (a local upstream) is allowed
    r = api.post("/api/providers/", doc, format="json")
    assert r.status_code == 201 and r.json()["channels"][0]["has_api_key"] is False
    Provider.objects.all().delete()

    doc = _provider_doc()
    doc["channels"][0]["models"][0]["multiplier"] = "0"
    r = api.post("/api/providers/", doc, format="json")
    assert r.status_code == 400 and "multiplier" in r.json()["channels"]["0"]["models"]["0"]

    doc = _provider_doc()
    doc["channels"][0]["extra_headers"] = {"Authorization": "x"}
    r = api.post("/api/providers/", doc, format="json")
    assert r.status_code == 400 and "extra_headers" in r.json()["channels"]["0"]

    doc = _provider_doc()
    doc["channels"].append(dict(doc["channels"][0]))
    r = api.post("/api/providers/", doc, format="json")
    assert r.status_code == 400 and "name" in r.json()["channels"]["1"]

    assert api.post("/api/providers/", _provider_doc(), format="json").status_code == 201
    r = api.post("/api/providers/", _provider_doc(), format="json")
    assert r.status_code == 400 and "name" in r.json()

    r = api.post("/api/providers/", _provider_doc(priority="high", extra_fields_whitelist=[1]), format="json")
    assert r.status_code == 400 and "priority" in r.json()

    r = api.post("/api/providers/", "not json", content_type="application/json")
    assert r.status_code == 400


def test_api_key_secret_returned_once(api):
    r = api.post(
        "/api/api-keys/", {"name": "team", "allowed_models": ["gpt-*"], "capture_mode": "all"}, format="json"
    )
    assert r.status_code == 201, r.json()
    secret = r.json()["secret"]
    key = ApiKey.objects.get(name="team")
    assert key.key_hash == crypto.hash_api_key(secret) and r.json()["prefix"] == secret[:12]
    for url in ("/api/api-keys/", f"/api/api-keys/{key.pk}/"):
        text = api.get(url).content.decode()
        assert secret not in text and "secret" not in text
    r = api.patch(f"/api/api-keys/{key.pk}/", {"enabled": False}, format="json")
    assert r.status_code == 200 and "secret" not in r.json()
    r = api.post(f"/api/api-keys/{key.pk}/rotate/")
    assert r.status_code == 200
    new = r.json()["secret"]
    key.refresh_from_db()
    assert new != secret and key.key_hash == crypto.hash_api_key(new)


def test_api_key_fixed_secret_and_errors(api):
    r = api.post("/api/api-keys/", {"name": "fixed", "key": "sk-fixed-000001"}, format="json")
    assert r.status_code == 201 and r.json()["secret"] == "sk-fixed-000001"
    assert "sk-fixed-000001" not in api.get("/api/api-keys/").content.decode()  # prefix is at most half
    r = api.post("/api/api-keys/", {"name": "again", "key": "sk-fixed-000001"}, format="json")
    assert r.status_code == 400 and "key" in r.json()
    r = api.post("/api/api-keys/", {"name": "short", "key": "sk-1"}, format="json")
    assert r.status_code == 400 and "key" in r.json()
    r = api.post(
        "/api/api-keys/",
        {
            "name": "bad",
            "allowed_models": "gpt",
            "model_redirects": [{"pattern": "("}],
            "capture_mode": "sometimes",
        },
        format="json",
    )
    assert r.status_code == 400
    assert {"capture_mode"} <= set(r.json())
    r = api.post(
        "/api/api-keys/",
        {"name": "bad", "allowed_models": "gpt", "model_redirects": [{"pattern": "(", "replace": "x"}]},
        format="json",
    )
    assert r.status_code == 400 and {"allowed_models", "model_redirects"} <= set(r.json())
    key_id = ApiKey.objects.get(name="fixed").pk
    r = api.patch(f"/api/api-keys/{key_id}/", {"key": "sk-another-0001"}, format="json")
    assert r.status_code == 400 and "key" in r.json()


def test_rules_crud_per_scope(api):
    provider = Provider.objects.create(name="p")
    key = ApiKey(name="k")
    key.set_secret()
    key.save()
    r = api.post(
        "/api/transforms/rules/",
        {
            "scope": "provider",
            "provider": provider.pk,
            "transform": "test_prefix",
            "config": {"content": "a"},
        },
        format="json",
    )
    assert r.status_code == 201, r.json()
    assert r.json()["position"] == 0 and r.json()["phase"] == "request"
    r = api.post(
        "/api/transforms/rules/",
        {
            "scope": "provider",
            "provider": provider.pk,
            "transform": "test_prefix",
            "config": {"content": "b"},
            "models": ["gpt-*"],
        },
        format="json",
    )
    assert r.status_code == 201 and r.json()["position"] == 1
    r = api.post(
        "/api/transforms/rules/",
        {"scope": "global", "transform": "test_routing", "phase": "response"},
        format="json",
    )
    assert r.status_code == 201, r.json()
    r = api.post(
        "/api/transforms/rules/",
        {"scope": "api_key", "api_key": key.pk, "transform": "test_prefix", "config": {"content": "c"}},
        format="json",
    )
    assert r.status_code == 201
    rule_id = r.json()["id"]

    def count(query):
        return api.get(f"/api/transforms/rules/?{query}").json()["count"]

    assert count("scope=provider") == 2 and count(f"provider={provider.pk}") == 2
    assert count("scope=global") == 1 and count(f"api_key={key.pk}") == 1 and count("scope=nope") == 0

    r = api.patch(
        f"/api/transforms/rules/{rule_id}/",
        {"config": {"content": "d", "position": "prepend"}},
        format="json",
    )
    assert r.status_code == 200 and TransformRule.objects.get(pk=rule_id).config["content"] == "d"
    assert api.delete(f"/api/transforms/rules/{rule_id}/").status_code == 204


def test_rule_field_level_errors(api):
    provider = Provider.objects.create(name="p")
    key = ApiKey(name="k")
    key.set_secret()
    key.save()
    cases = [
        ({"scope": "provider", "transform": "test_prefix", "config": {"content": "a"}}, "provider"),
        (
            {
                "scope": "global",
                "provider": provider.pk,
                "transform": "test_prefix",
                "config": {"content": "a"},
            },
            "provider",
        ),
        ({"scope": "global", "transform": "nope"}, "transform"),
        ({"scope": "global", "transform": "test_prefix", "config": {"content": ""}}, "config"),
        (
            {"scope": "global", "transform": "test_prefix", "config": {"content": "a"}, "phase": "response"},
            "phase",
        ),
        ({"scope": "api_key", "api_key": key.pk, "transform": "test_routing"}, "transform"),
        (
            {"scope": "global", "transform": "test_prefix", "config": {"content": "a"}, "models": "gpt"},
            "models",
        ),
        ({"scope": "global", "transform": "test_prefix", "config": []}, "config"),
        ({"scope": "sideways", "transform": "test_prefix"}, "scope"),
    ]
    for body, field in cases:
        r = api.post("/api/transforms/rules/", body, format="json")
        assert r.status_code == 400, (body, r.content)
        assert field in r.json(), (body, r.json())
    assert not TransformRule.objects.exists()
    rule = TransformRule.objects.create(scope="global", transform="test_prefix", config={"content": "x"})
    r = api.patch(f"/api/transforms/rules/{rule.pk}/", {"config": {"content": 3}}, format="json")
    assert r.status_code == 400 and "config" in r.json()
    rule.refresh_from_db()
    assert rule.config == {"content": "x"}


def test_registry_lists_transforms(api):
    r = api.get("/api/transforms/registry")
    assert r.status_code == 200
    assert {e["type_id"] for e in r.json()} == {"test_prefix", "test_routing"}


def test_settings_singleton(api):
    r = api.get("/api/settings/")
    assert r.status_code == 200 and r.json()["capture_enabled"] is True
    r = api.put("/api/settings/", {"capture_enabled": False, "capture_retention_days": 3}, format="json")
    assert r.status_code == 200 and r.json()["capture_retention_days"] == 3
    assert GlobalSettings.load().capture_enabled is False
    r = api.patch("/api/settings/", {"capture_retention_days": -1}, format="json")
    assert r.status_code == 400 and "capture_retention_days" in r.json()
    assert GlobalSettings.objects.count() == 1
