"""Saving reasoning rules through the REST API (the write path the admin and the config file
share): rules kept out of API-key chains are refused there with a message naming the rule, invalid
configs are refused, and historical ids are stored canonically."""

from __future__ import annotations

import pytest
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from keys.models import ApiKey
from providers.models import Provider
from transforms.models import TransformRule

pytestmark = pytest.mark.django_db


@pytest.fixture
def api(admin_user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=admin_user).key}")
    return client


@pytest.fixture
def key() -> ApiKey:
    k = ApiKey(name="k")
    k.set_secret()
    k.save()
    return k


@pytest.mark.parametrize(
    ("transform", "config"),
    [
        ("reasoning_effort_to_budget", {"low": 1, "med": 2, "high": 3}),
        ("reasoning_effort_to_model_suffix", {"rules": [{"pattern": "*", "suffix": "-{effort}"}]}),
    ],
)
def test_cost_and_routing_rules_refused_on_keys(api, key, transform, config):
    r = api.post(
        "/api/transforms/rules/",
        {"scope": "api_key", "api_key": key.pk, "transform": transform, "config": config},
        format="json",
    )
    assert r.status_code == 400
    assert transform in str(r.json())
    provider = Provider.objects.create(name="p")
    r = api.post(
        "/api/transforms/rules/",
        {"scope": "provider", "provider": provider.pk, "transform": transform, "config": config},
        format="json",
    )
    assert r.status_code == 201, r.json()


def test_invalid_config_refused(api):
    provider = Provider.objects.create(name="p")
    r = api.post(
        "/api/transforms/rules/",
        {
            "scope": "provider",
            "provider": provider.pk,
            "transform": "reasoning_summary_heading",
            "phase": "response",
            "config": {"max_title_chars": 0},
        },
        format="json",
    )
    assert r.status_code == 400 and "config" in r.json()


@pytest.mark.parametrize(
    ("alias", "canonical"),
    [
        ("think_xml_to_reasoning", "reasoning_from_think_xml"),
        ("strip_reasoning", "reasoning_strip_output"),
        ("strip_encrypted_reasoning", "reasoning_strip_encrypted"),
    ],
)
def test_historical_ids_stored_canonically(api, key, alias, canonical):
    config = {"tag": "think"} if canonical == "reasoning_from_think_xml" else {}
    r = api.post(
        "/api/transforms/rules/",
        {"scope": "api_key", "api_key": key.pk, "transform": alias, "phase": "response", "config": config},
        format="json",
    )
    assert r.status_code == 201, r.json()
    assert TransformRule.objects.get(pk=r.json()["id"]).transform == canonical
