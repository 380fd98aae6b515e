"""A rule naming a transform that is not installed (an uninstalled plug-in, a typo): refused on
every save path, shown as broken in the admin, ``500 transform_init_failed`` at request time
(that last part is also covered end to end in tests/proxy/test_chains.py)."""

from __future__ import annotations

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from gateway.configfile import ConfigError, load
from gateway.errors import TransformInitFailed
from gateway.live_config import compile_rule
from transforms.models import TransformRule

pytestmark = pytest.mark.django_db

MISSING = "redact_patterns_not_here"


def test_rest_api_refuses_it(admin_user):
    api = APIClient()
    api.force_authenticate(admin_user)
    r = api.post(
        "/api/transforms/rules/", {"scope": "global", "transform": MISSING, "phase": "request"}, format="json"
    )
    assert r.status_code == 400
    assert "not installed" in r.json()["transform"][0]
    assert not TransformRule.objects.exists()


def test_loadconfig_refuses_it():
    with pytest.raises(ConfigError) as exc:
        load({"global_transforms": [{"transform": MISSING}]})
    assert "global_transforms[0].transform" in str(exc.value) and MISSING in str(exc.value)
    assert not TransformRule.objects.exists()


def test_admin_refuses_it(admin_client):
    r = admin_client.post(
        reverse("admin:transforms_globaltransformrule_add"),
        {
            "transform": MISSING,
            "phase": "request",
            "enabled": "on",
            "models": "",
            "config": "{}",
            "position": "0",
        },
    )
    assert r.status_code == 200 and "not installed as a plug-in" in r.content.decode()
    assert not TransformRule.objects.exists()


def test_stored_rule_shows_as_broken_in_the_admin(admin_client):
    rule = TransformRule.objects.create(scope="global", transform=MISSING, config={"patterns": ["x"]})
    listing = admin_client.get(reverse("admin:transforms_globaltransformrule_changelist")).content.decode()
    assert (
        f"{MISSING} (not installed: requests that reach this rule fail with 500 transform_init_failed)"
        in listing
    )
    page = admin_client.get(
        reverse("admin:transforms_globaltransformrule_change", args=[rule.pk])
    ).content.decode()
    assert '<optgroup label="Broken rule">' in page
    assert (
        'data-broken="not installed: requests that reach this rule fail with 500 transform_init_failed"'
        in page
    )
    assert "broken: transform not installed" in str(rule)


def test_stored_rule_fails_at_request_time_not_at_snapshot_build():
    rule = TransformRule.objects.create(scope="global", transform=MISSING, config={})
    compiled = compile_rule(rule)
    assert compiled is not None and compiled.type_id == MISSING
    with pytest.raises(TransformInitFailed, match="not installed as a plug-in"):
        compiled.transform.apply_request(None, None)
