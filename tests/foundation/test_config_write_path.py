"""One write path: the config file's published JSON Schema is current and describes real files;
the file, the REST API and the settings accessor agree on names and spellings."""

from __future__ import annotations

import io
from pathlib import Path

import jsonschema
import pytest
import yaml
from django.conf import settings
from django.core.management import call_command
from django.test import override_settings
from rest_framework.test import APIClient

from gateway.conf import gateway_settings
from gateway.configfile import ConfigError, dump, load
from gateway.configschema import json_schema
from keys.models import ApiKey
from providers.models import Provider
from tests.foundation.test_configfile import EXAMPLE

ROOT = Path(__file__).resolve().parents[2]


def test_published_schema_is_current():
    out = io.StringIO()
    call_command("configschema", "--check", stdout=out)  # raises CommandError when stale
    assert "is current" in out.getvalue()


@pytest.mark.parametrize("text", [EXAMPLE, (ROOT / "config" / "demo.yaml").read_text()])
def test_schema_accepts_real_files(text):
    jsonschema.Draft202012Validator(json_schema()).validate(yaml.safe_load(text))


@pytest.mark.parametrize(
    "mutate",
    [
        lambda d: d["providers"][0]["channels"][0].update(protocol="grpc"),
        lambda d: d["providers"][0].update(colour="red"),
        lambda d: d["providers"][1].pop("name"),
        lambda d: d["api_keys"][0].update(capture_mode="sometimes"),
        lambda d: d["settings"].update(capture_enabled="yes"),
    ],
)
def test_schema_rejects_what_loadconfig_rejects(mutate):
    doc = yaml.safe_load(EXAMPLE)
    mutate(doc)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft202012Validator(json_schema()).validate(doc)


@pytest.mark.django_db
def test_file_uses_capture_mode_and_still_reads_capture():
    load(
        {
            "api_keys": [
                {"name": "a", "key": "sk-aaaa-000001", "capture_mode": "abnormal"},
                {"name": "b", "key": "sk-bbbb-000001", "capture": "all"},
            ]
        }
    )
    assert dict(ApiKey.objects.values_list("name", "capture_mode")) == {"a": "abnormal", "b": "all"}
    assert [k["capture_mode"] for k in dump()["api_keys"]] == ["abnormal", "all"]
    with pytest.raises(ConfigError) as exc:
        load({"api_keys": [{"name": "a", "capture": "all", "capture_mode": "off"}]})
    assert exc.value.errors == ["api_keys[0].capture: give either capture_mode or capture, not both"]
    with pytest.raises(ConfigError) as exc:
        load({"api_keys": [{"name": "a", "capture_mode": "sometimes"}]})
    assert exc.value.errors[0].startswith(
        "api_keys[0].capture_mode: Value 'sometimes' is not a valid choice."
    )


@pytest.mark.django_db
def test_tristate_spellings_are_the_same_in_the_file_and_the_rest_api(admin_user):
    api = APIClient()
    api.force_authenticate(admin_user)
    for sent, stored in ((False, "false"), (None, "inherit"), ("true", "true"), (True, "true")):
        r = api.post(
            "/api/providers/",
            {"name": f"p-{stored}-{sent}", "strip_cross_protocol_nested": sent},
            format="json",
        )
        assert r.status_code == 201, r.json()
        assert Provider.objects.get(pk=r.json()["id"]).strip_cross_protocol_nested == stored
        load({"providers": [{"name": "f", "strip_cross_protocol_nested": sent}]})
        assert Provider.objects.get(name="f").strip_cross_protocol_nested == stored
    r = api.post(
        "/api/providers/", {"name": "bad", "strip_cross_protocol_nested": "sometimes"}, format="json"
    )
    assert r.status_code == 400 and "strip_cross_protocol_nested" in r.json()


def test_gateway_settings_declared_defaults_and_overrides():
    assert gateway_settings.BREAKER_FAILURES == settings.GATEWAY["BREAKER_FAILURES"]
    with override_settings(GATEWAY={"BREAKER_FAILURES": "7"}):
        assert gateway_settings.BREAKER_FAILURES == 7
        assert gateway_settings.CAPTURE_QUEUE_MAX == 1000  # left out: the declared default
    with pytest.raises(AttributeError, match="declare it"):
        gateway_settings.NO_SUCH_KNOB  # noqa: B018


def test_no_environment_reads_outside_settings():
    """Knobs are declared in gateway/settings.py; other modules read gateway_settings.
    (gateway/proxy and gateway/protocols are being restructured elsewhere; they read settings.GATEWAY.)"""
    allowed = {
        "gateway/settings.py",
        "manage.py",
        "gateway/asgi.py",
        "gateway/wsgi.py",
        "gateway/celery.py",
        "gateway/management/commands/ensureadmin.py",
        "gateway/launch.py",  # an entry point like asgi.py: sets its worker processes' environment
        "gateway/configenv.py",  # ${NAME} references in the operator's config file
        "gateway/observe/metrics.py",
    }  # PROMETHEUS_MULTIPROC_DIR: prometheus_client's own variable
    offenders = []
    for pkg in ("gateway", "providers", "keys", "transforms", "captures"):
        for path in (ROOT / pkg).rglob("*.py"):
            rel = path.relative_to(ROOT).as_posix()
            if rel in allowed or "/mock_upstream/" in rel:
                continue
            text = path.read_text()
            if "os.environ" in text or "getenv(" in text:
                offenders.append(rel)
    assert offenders == []
