"""Odd input never becomes a 500: every endpoint answers malformed bodies with a 4xx."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from keys.models import ApiKey
from providers.models import Provider

pytestmark = pytest.mark.django_db

ODD_BODIES = [
    [],
    "text",
    3,
    None,
    {"name": None},
    {"name": ["x"]},
    {"name": "x" * 500},
    {"name": "x", "channels": "nope"},
    {"name": "x", "channels": [None]},
    {"name": "x", "channels": [{"models": 3}]},
    {
        "name": "x",
        "channels": [
            {
                "name": "c",
                "protocol": "gemini",
                "base_url": "http://h",
                "api_key": "k",
                "models": [{"model": "m", "multiplier": "1e30"}],
            }
        ],
    },
    {
        "name": "x",
        "channels": [
            {
                "name": "c",
                "protocol": "gemini",
                "base_url": "http://h",
                "api_key": "k",
                "models": [{"model": "m", "multiplier": "0.0000000001"}],
            }
        ],
    },
    {
        "name": "x",
        "channels": [
            {
                "name": "c",
                "protocol": "gemini",
                "base_url": "http://h",
                "api_key": "k",
                "models": [{"model": "m", "multiplier": "NaN"}],
            }
        ],
    },
    {"name": "x", "channels": [{"id": 999999, "name": "c"}]},
    {"name": "x", "extra_fields_whitelist": {"a": 1}, "request_timeout_seconds": "slow"},
    {"scope": "provider", "provider": 999999, "transform": "test_prefix"},
    {"scope": "global", "transform": ["test_prefix"]},
    {"scope": "global", "transform": "test_prefix", "config": "x"},
    {"name": "k", "expires_at": "soon", "owner": 999999},
    {"name": "k", "allowed_models": [1, 2]},
    {"name": "k", "model_redirects": [{"pattern": "a" * 300, "replace": "b"}] * 40},
    {"capture_retention_days": "many"},
    {"request_timeout_seconds": -5},
]
ENDPOINTS = ["/api/providers/", "/api/api-keys/", "/api/transforms/rules/"]


@pytest.fixture
def api(admin_user) -> APIClient:
    client = APIClient()
    client.force_authenticate(admin_user)
    return client


@pytest.mark.parametrize("url", ENDPOINTS)
def test_create_with_odd_bodies(api, url):
    for body in ODD_BODIES:
        r = api.post(url, body, format="json")
        assert 400 <= r.status_code < 500 or r.status_code == 201, (url, body, r.status_code)
        assert r.status_code != 201 or isinstance(body, dict)


def test_update_with_odd_bodies(api):
    provider = Provider.objects.create(name="p")
    key = ApiKey(name="k")
    key.set_secret()
    key.save()
    for url in (f"/api/providers/{provider.pk}/", f"/api/api-keys/{key.pk}/", "/api/settings/"):
        for body in ODD_BODIES:
            for method in (api.put, api.patch):
                r = method(url, body, format="json")
                assert r.status_code < 500, (url, body, r.status_code)


def test_unknown_ids_are_404(api):
    for url in ("/api/providers/999999/", "/api/api-keys/999999/", "/api/transforms/rules/999999/"):
        assert api.get(url).status_code == 404
    assert api.post("/api/api-keys/999999/rotate/").status_code == 404
    assert api.get("/api/transforms/rules/?provider=abc").json()["count"] == 0
