"""Values PostgreSQL cannot store never reach it: NUL characters (refused in text and JSON
strings) in the path or query string of a Django page are a 400, in a configuration value (the
REST API, the admin, the config file) a field error; NaN and Infinity in a JSON configuration
value (not JSON) are a field error too. Every test runs on SQLite and PostgreSQL alike."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from keys.models import ApiKey
from providers.models import Provider
from transforms.models import TransformRule

pytestmark = pytest.mark.django_db

URLS = [
    "/api/request-logs/?search=a%00b",
    "/api/request-logs/?model=a%00b",
    "/api/request-logs/?endpoint=a%00b",
    "/api/request-logs/?username=a%00b",
    "/api/request-logs/a%00b/",
    "/api/captures/?request_id=a%00b",
    "/api/captures/?model=a%00b",
    "/captures/?model=a%00b",
    "/captures/a%00b/",
    "/admin/requestlogs/requestlog/?q=a%00b",
    "/admin/keys/apikey/?q=%00",
]


@pytest.mark.parametrize("url", URLS)
def test_a_nul_character_is_a_clear_400(admin_client, url):
    reply = admin_client.get(url)
    assert reply.status_code == 400, reply.content[:200]
    assert b"NUL character" in reply.content
    if url.startswith("/api/"):
        assert reply.json()["code"] == "nul_character"


def test_an_escaped_percent_sign_is_not_a_nul(admin_client):
    assert admin_client.get("/api/request-logs/?search=%2500").status_code == 200


@pytest.fixture
def api(admin_user) -> APIClient:
    client = APIClient()
    client.force_authenticate(admin_user)
    return client


@pytest.mark.parametrize(
    ("url", "body", "field"),
    [
        ("/api/api-keys/", {"name": "k", "allowed_models": ["gpt-\x00"]}, "allowed_models"),
        (
            "/api/transforms/rules/",
            {"scope": "global", "transform": "test_prefix", "config": {"content": "a\x00b"}},
            "config",
        ),
        (
            "/api/transforms/rules/",
            {"scope": "global", "transform": "test_prefix", "config": {"content": "a"}, "models": ["m\x00"]},
            "models",
        ),
    ],
)
def test_a_nul_in_a_json_value_is_a_field_error(api, url, body, field):
    """DRF's CharField refuses NUL; a JSON value (a rule's config, a key's model list) was saved
    and PostgreSQL's refusal was a 500."""
    reply = api.post(url, body, format="json")
    assert reply.status_code == 400, reply.content
    assert reply.json()[field] == ["Null characters are not allowed."]
    assert not ApiKey.objects.exists() and not TransformRule.objects.exists()


def test_the_config_file_names_the_field_with_a_nul(tmp_path, capsys):
    from django.core.management import CommandError, call_command

    doc = tmp_path / "c.yaml"
    doc.write_text(
        "providers:\n"
        '  - name: "p1"\n'
        "    channels:\n"
        "      - name: c1\n"
        "        protocol: chat_completion\n"
        "        base_url: http://127.0.0.1:9/v1\n"
        "        models: [{model: m1}]\n"
        "api_keys:\n"
        '  - name: "k1"\n'
        '    allowed_models: ["m\\0"]\n'
    )
    with pytest.raises(CommandError, match="1 error"):
        call_command("loadconfig", str(doc))
    assert "api_keys[0].allowed_models: Null characters are not allowed." in capsys.readouterr().err
    assert not Provider.objects.exists() and not ApiKey.objects.exists()


def test_full_clean_reports_a_nul_beside_other_field_errors():
    """What the admin's forms run (``full_clean``): the NUL is the field's error, and another
    field's own error is still reported."""
    from django.core.exceptions import ValidationError

    rule = TransformRule(scope="sideways", transform="test_prefix", config={"content": "x\x00"})
    with pytest.raises(ValidationError) as exc:
        rule.full_clean()
    assert exc.value.message_dict["config"] == ["Null characters are not allowed."]
    assert "scope" in exc.value.message_dict


def test_a_number_that_is_not_finite_in_a_json_value_is_a_field_error(tmp_path, capsys):
    """YAML's ``.nan`` and ``.inf`` (and the admin's JSON textarea) give floats JSON cannot hold:
    PostgreSQL refused the row; it is a field error, named by the config file."""
    from django.core.exceptions import ValidationError
    from django.core.management import CommandError, call_command

    doc = tmp_path / "c.yaml"
    doc.write_text("global_transforms:\n  - transform: test_prefix\n    config: {content: a, weight: .nan}\n")
    with pytest.raises(CommandError, match="1 error"):
        call_command("loadconfig", str(doc))
    assert "Numbers must be finite" in capsys.readouterr().err
    assert not TransformRule.objects.exists()
    rule = TransformRule(
        scope="global", transform="test_prefix", config={"content": "a", "n": [float("inf")]}
    )
    with pytest.raises(ValidationError) as exc:
        rule.full_clean()
    assert "Numbers must be finite: NaN and Infinity are not JSON." in exc.value.message_dict["config"]
