"""Admin pages: every list and add page renders; channel keys are write-only; API key secrets are
shown once; chains are saved with the right scope."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from gateway import crypto
from gateway.models import GlobalSettings
from keys.models import ApiKey
from providers.models import Channel, ChannelModel, Provider
from transforms.models import TransformRule

pytestmark = pytest.mark.django_db

ADMIN_MODELS = [
    "providers_provider",
    "providers_channel",
    "providers_channelmodel",
    "keys_apikey",
    "transforms_globaltransformrule",
]


def _management(prefix: str, total: int = 0, initial: int = 0) -> dict[str, str]:
    return {
        f"{prefix}-TOTAL_FORMS": str(total),
        f"{prefix}-INITIAL_FORMS": str(initial),
        f"{prefix}-MIN_NUM_FORMS": "0",
        f"{prefix}-MAX_NUM_FORMS": "1000",
    }


@pytest.fixture
def channel(db) -> Channel:
    provider = Provider.objects.create(name="up")
    ch = Channel(
        provider=provider, name="primary", protocol="chat_completion", base_url="http://127.0.0.1:9/v1"
    )
    ch.set_api_key("sk-upstream-very-secret")
    ch.save()
    ChannelModel.objects.create(channel=ch, model="gpt-4o", upstream_model="gpt-4o-2024-08-06")
    return ch


@pytest.mark.parametrize("name", ADMIN_MODELS)
def test_changelist_and_add_pages_render(admin_client, channel, name):
    assert admin_client.get(reverse(f"admin:{name}_changelist")).status_code == 200
    assert admin_client.get(reverse(f"admin:{name}_add")).status_code == 200


def test_every_registered_admin_page_renders(admin_client, admin_user, channel):
    """Not just ours: every model registered in the admin site, list and (when allowed) add."""
    from django.contrib import admin as django_admin
    from django.test import RequestFactory

    request = RequestFactory().get("/")
    request.user = admin_user
    for model, model_admin in django_admin.site._registry.items():
        info = f"{model._meta.app_label}_{model._meta.model_name}"
        response = admin_client.get(reverse(f"admin:{info}_changelist"), follow=True)
        assert response.status_code == 200, info
        if model_admin.has_add_permission(request):
            assert admin_client.get(reverse(f"admin:{info}_add")).status_code == 200, info


def test_change_pages_and_search_render(admin_client, channel):
    key = ApiKey(name="k")
    key.set_secret()
    key.save()
    for url in (
        reverse("admin:providers_provider_change", args=[channel.provider.pk]),
        reverse("admin:providers_channel_change", args=[channel.pk]),
        reverse("admin:keys_apikey_change", args=[key.pk]),
        reverse("admin:providers_provider_changelist") + "?q=gpt-4o",
        reverse("admin:providers_channel_changelist") + "?protocol=chat_completion",
        reverse("admin:keys_apikey_changelist") + "?q=k",
    ):
        assert admin_client.get(url).status_code == 200, url


def test_global_settings_page_is_the_singleton(admin_client):
    response = admin_client.get(reverse("admin:gateway_globalsettings_changelist"))
    assert response.status_code == 302
    assert admin_client.get(response["Location"]).status_code == 200
    assert GlobalSettings.objects.count() == 1
    assert admin_client.get(reverse("admin:gateway_globalsettings_add")).status_code == 403


def test_channel_key_never_rendered(admin_client, channel):
    for url in (
        reverse("admin:providers_provider_change", args=[channel.provider.pk]),
        reverse("admin:providers_channel_change", args=[channel.pk]),
        reverse("admin:providers_channel_changelist"),
        reverse("admin:providers_provider_changelist"),
    ):
        html = admin_client.get(url).content.decode()
        assert "sk-upstream-very-secret" not in html
        assert channel.api_key_encrypted not in html


def _channel_post(channel: Channel, **overrides) -> dict[str, str]:
    data = {
        "provider": str(channel.provider_id),
        "name": channel.name,
        "protocol": channel.protocol,
        "base_url": channel.base_url,
        "api_key": "",
        "weight": "1",
        "enabled": "on",
        "extra_headers": "null",
        **_management("models", total=1, initial=1),
        "models-0-id": str(channel.models.get().pk),
        "models-0-channel": str(channel.pk),
        "models-0-model": "gpt-4o",
        "models-0-upstream_model": "gpt-4o-2024-08-06",
        "models-0-multiplier": "1",
    }
    data.update(overrides)
    return data


def test_empty_key_on_edit_keeps_stored_key(admin_client, channel):
    url = reverse("admin:providers_channel_change", args=[channel.pk])
    response = admin_client.post(url, _channel_post(channel, weight="3"))
    assert response.status_code == 302, response.content.decode()[:2000]
    channel.refresh_from_db()
    assert channel.weight == 3
    assert channel.get_api_key() == "sk-upstream-very-secret"


def test_new_key_on_edit_replaces_stored_key(admin_client, channel):
    url = reverse("admin:providers_channel_change", args=[channel.pk])
    response = admin_client.post(url, _channel_post(channel, api_key="sk-rotated-upstream"))
    assert response.status_code == 302
    channel.refresh_from_db()
    assert channel.get_api_key() == "sk-rotated-upstream"
    html = admin_client.get(url).content.decode()
    assert "sk-rotated-upstream" not in html


def test_channel_key_is_optional_and_write_only(admin_client, db):
    provider = Provider.objects.create(name="p2")
    data = {
        "provider": str(provider.pk),
        "name": "c",
        "protocol": "messages",
        "base_url": "http://127.0.0.1:9",
        "api_key": "",
        "weight": "1",
        "enabled": "on",
        "extra_headers": "null",
        **_management("models"),
    }
    response = admin_client.post(reverse("admin:providers_channel_add"), data)
    assert response.status_code == 302  # a local upstream needs no key
    assert not Channel.objects.get(name="c").has_api_key
    data["api_key"] = "sk-new-upstream"
    response = admin_client.post(
        reverse("admin:providers_channel_change", args=[Channel.objects.get(name="c").pk]), data
    )
    assert response.status_code == 302
    assert Channel.objects.get(name="c").get_api_key() == "sk-new-upstream"


def _provider_post(**overrides) -> dict[str, str]:
    data = {
        "name": "prov",
        "enabled": "on",
        "priority": "0",
        "max_retries": "-1",
        "channel_max_retries": "0",
        "channel_retry_interval_ms": "0",
        "request_timeout_seconds": "",
        "circuit_breaker_enabled": "on",
        "multiplier": "1",
        "strip_cross_protocol_nested": "inherit",
        "extra_fields_whitelist": "null",
        "affinity_mode": "off",
        "affinity_failback_seconds": "300",
        **_management("channels", total=1),
        **_management("transform_rules", total=1),
        "channels-0-name": "main",
        "channels-0-protocol": "responses",
        "channels-0-base_url": "http://127.0.0.1:9100/v1",
        "channels-0-api_key": "sk-inline-key",
        "channels-0-weight": "1",
        "channels-0-enabled": "on",
        "transform_rules-0-position": "0",
        "transform_rules-0-transform": "test_prefix",
        "transform_rules-0-enabled": "on",
        "transform_rules-0-phase": "request",
        "transform_rules-0-models": "gpt-*",
        "transform_rules-0-config": '{"content": "Hi"}',
    }
    data.update(overrides)
    return data


def test_provider_add_with_inline_channel_and_rule(admin_client):
    response = admin_client.post(reverse("admin:providers_provider_add"), _provider_post())
    assert response.status_code == 302, response.content.decode()[:3000]
    provider = Provider.objects.get(name="prov")
    assert provider.channels.get().get_api_key() == "sk-inline-key"
    rule = TransformRule.objects.get()
    assert (rule.scope, rule.provider_id, rule.config, rule.models) == (
        "provider",
        provider.pk,
        {"content": "Hi"},
        ["gpt-*"],
    )


def test_provider_add_rejects_invalid_rule_config(admin_client):
    response = admin_client.post(
        reverse("admin:providers_provider_add"),
        _provider_post(**{"transform_rules-0-config": '{"content": ""}'}),
    )
    assert response.status_code == 200
    assert "content" in response.content.decode()
    assert not Provider.objects.exists()


def test_api_key_secret_shown_once(admin_client):
    data = {
        "name": "team",
        "enabled": "on",
        "expires_at_0": "",
        "expires_at_1": "",
        "allowed_models": '["*"]',
        "model_redirects": "null",
        "capture_mode": "off",
        "owner": "",
        **_management("transform_rules"),
    }
    response = admin_client.post(reverse("admin:keys_apikey_add"), data)
    assert response.status_code == 200
    html = response.content.decode()
    match = re.search(r'<code class="api-key-secret"[^>]*>([^<]+)</code>', html)
    assert match, html[:3000]
    secret = match.group(1)
    key = ApiKey.objects.get(name="team")
    assert key.key_hash == crypto.hash_api_key(secret)
    assert secret.startswith(key.prefix)
    # Never again: not on the change page, not in the list, and not stored in plain text anywhere.
    for url in (reverse("admin:keys_apikey_change", args=[key.pk]), reverse("admin:keys_apikey_changelist")):
        assert secret not in admin_client.get(url).content.decode()
    assert secret not in str(list(ApiKey.objects.values()))


def test_api_key_rule_inline_refuses_transform_not_for_keys(admin_client):
    data = {
        "name": "team",
        "enabled": "on",
        "expires_at_0": "",
        "expires_at_1": "",
        "allowed_models": "null",
        "model_redirects": "null",
        "capture_mode": "off",
        "owner": "",
        **_management("transform_rules", total=1),
        "transform_rules-0-position": "0",
        "transform_rules-0-transform": "test_routing",
        "transform_rules-0-enabled": "on",
        "transform_rules-0-phase": "request",
        "transform_rules-0-models": "",
        "transform_rules-0-config": "{}",
    }
    response = admin_client.post(reverse("admin:keys_apikey_add"), data)
    assert response.status_code == 200  # the form comes back with an error; nothing is saved
    assert "errorlist" in response.content.decode()
    assert not ApiKey.objects.exists() and not TransformRule.objects.exists()


def test_rotate_secret_action(admin_client):
    key = ApiKey(name="old")
    old = key.set_secret()
    key.save()
    response = admin_client.post(
        reverse("admin:keys_apikey_changelist"),
        {"action": "rotate_secret", "_selected_action": [str(key.pk)]},
    )
    assert response.status_code == 200
    new = re.search(r'<code class="api-key-secret"[^>]*>([^<]+)</code>', response.content.decode()).group(1)
    key.refresh_from_db()
    assert new != old and key.key_hash == crypto.hash_api_key(new)


def test_global_chain_admin_saves_global_scope(admin_client):
    data = {
        "position": "0",
        "transform": "test_prefix",
        "enabled": "on",
        "phase": "request",
        "models": "",
        "config": '{"content": "Be brief."}',
    }
    response = admin_client.post(reverse("admin:transforms_globaltransformrule_add"), data)
    assert response.status_code == 302, response.content.decode()[:3000]
    rule = TransformRule.objects.get()
    assert (rule.scope, rule.provider_id, rule.api_key_id) == ("global", None, None)


def test_admin_is_branded_ordered_and_links_the_viewer(admin_client):
    html = admin_client.get("/admin/").content.decode()
    assert "Monogate administration" in html
    assert 'href="/captures/"' in html
    order = [
        html.index(f'class="app-{label} ')
        for label in ("providers", "keys", "transforms", "captures", "auth")
    ]
    assert order == sorted(order), "apps in the order operators use them"


def test_new_key_secret_page_has_a_copy_button(admin_client):
    data = {
        "name": "copy-me",
        "enabled": "on",
        "expires_at_0": "",
        "expires_at_1": "",
        "allowed_models": '["*"]',
        "model_redirects": "null",
        "capture_mode": "off",
        "owner": "",
        **_management("transform_rules"),
    }
    response = admin_client.post(reverse("admin:keys_apikey_add"), data)
    html = response.content.decode()
    assert 'class="button copy-secret"' in html and "navigator.clipboard" in html


def test_landing_page_links_everything(client):
    html = client.get("/").content.decode()
    for href in ('href="/admin/"', 'href="/captures/"', 'href="/api/"'):
        assert href in html
    assert "http://testserver/v1" in html


@pytest.mark.django_db
def test_rest_api_root_lists_every_endpoint_and_asks_for_credentials(client, admin_client):
    anonymous = client.get("/api/")
    assert anonymous.status_code == 401 and anonymous.headers["WWW-Authenticate"] == "Token"
    listed = admin_client.get("/api/").json()
    for path in ("providers", "api-keys", "transforms/rules", "transforms/registry", "settings", "captures"):
        assert listed[path].endswith(f"/api/{path}/")
    assert admin_client.get("/api/transforms/registry").status_code == 200  # the documented form


def test_api_key_names_are_unique_so_a_reposted_form_creates_no_second_key(admin_client):
    data = {
        "name": "twice",
        "enabled": "on",
        "expires_at_0": "",
        "expires_at_1": "",
        "allowed_models": '["*"]',
        "model_redirects": "null",
        "capture_mode": "off",
        "owner": "",
        **_management("transform_rules"),
    }
    admin_client.post(reverse("admin:keys_apikey_add"), data)
    again = admin_client.post(reverse("admin:keys_apikey_add"), data)
    assert "already exists" in again.content.decode()
    assert ApiKey.objects.filter(name="twice").count() == 1
    rest = admin_client.post("/api/api-keys/", {"name": "twice"}, content_type="application/json")
    assert rest.status_code == 400 and "name" in rest.json()


def test_json_fields_are_edited_as_rows_and_globs_and_empty_is_not_null(admin_client):
    data = {
        "name": "rows",
        "enabled": "on",
        "expires_at_0": "",
        "expires_at_1": "",
        "allowed_models": "gpt-*, claude-?",
        "capture_mode": "off",
        "owner": "",
        "model_redirects__key": ["gpt-4o-mini", "", ""],
        "model_redirects__value": ["gpt-4o", "", ""],
        **_management("transform_rules"),
    }
    admin_client.post(reverse("admin:keys_apikey_add"), data)
    key = ApiKey.objects.get(name="rows")
    assert key.allowed_models == ["gpt-*", "claude-?"]
    assert key.model_redirects == [{"pattern": "gpt-4o-mini", "replace": "gpt-4o"}]
    page = admin_client.get(reverse("admin:keys_apikey_change", args=[key.pk])).content.decode()
    assert 'name="model_redirects__key" value="gpt-4o-mini"' in page
    assert re.search(r'id="id_allowed_models">\s*gpt-\*, claude-\?</textarea>', page)
    empty_page = admin_client.get(reverse("admin:keys_apikey_add")).content.decode()
    assert re.search(r'id="id_allowed_models">\s*</textarea>', empty_page), "empty, not null"
    half = {
        **data,
        "name": "half",
        "model_redirects__key": ["x", "", ""],
        "model_redirects__value": ["", "", ""],
    }
    assert "needs both" in admin_client.post(reverse("admin:keys_apikey_add"), half).content.decode()
    empty = {
        **data,
        "name": "empty",
        "allowed_models": "",
        "model_redirects__key": ["", "", ""],
        "model_redirects__value": ["", "", ""],
    }
    admin_client.post(reverse("admin:keys_apikey_add"), empty)
    stored = ApiKey.objects.get(name="empty")
    assert stored.allowed_models is None and stored.model_redirects is None


def test_channel_extra_headers_as_rows(admin_client, channel):
    page = admin_client.get(reverse("admin:providers_channel_change", args=[channel.pk])).content.decode()
    assert 'name="extra_headers__key"' in page
