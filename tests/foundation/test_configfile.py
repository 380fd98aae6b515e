"""Declarative configuration: load, dump, reload; prune; bad files name the exact path and
write nothing; the management commands around it."""

from __future__ import annotations

import io
import json
from decimal import Decimal
from pathlib import Path

import pytest
import yaml
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError

from gateway import crypto
from gateway.configfile import ConfigError, dump, load
from gateway.models import GlobalSettings
from keys.models import ApiKey
from providers.models import Channel, ChannelModel, Provider
from transforms.models import TransformRule

pytestmark = pytest.mark.django_db

EXAMPLE = """
providers:
  - name: openai-main
    priority: 0
    channels:
      - {name: primary, protocol: chat_completion, base_url: "http://127.0.0.1:9100/v1", api_key: sk-up, weight: 1,
         models: [{model: gpt-4o, upstream_model: gpt-4o-2024-08-06}, {model: gpt-4o-mini, multiplier: "0.25"}]}
      - {name: backup, protocol: responses, base_url: "http://127.0.0.1:9100/v1", api_key: sk-up-2, weight: 0,
         extra_headers: {X-Team: blue}, models: [gpt-4o]}
    transforms:
      - {transform: test_prefix, phase: request, models: ["gpt-4*"], config: {content: "Answer in French.", position: append}}
      - {transform: test_routing, enabled: false, phase: response, config: {}}
  - name: anthropic
    priority: 1
    max_retries: 2
    strip_cross_protocol_nested: false
    channels:
      - {name: main, protocol: messages, base_url: "http://127.0.0.1:9100", api_key: sk-ant, models: [claude-x]}
global_transforms:
  - {transform: test_prefix, config: {content: "global"}}
api_keys:
  - {name: demo, key: sk-demo-0001, capture: all, allowed_models: ["*"], transforms: [{transform: test_prefix, config: {content: k}}]}
  - {name: generated, enabled: false, expires_at: "2030-01-01T00:00:00+00:00"}
settings: {capture_enabled: false, capture_retention_days: 3}
"""


def _load(text: str, **kw):
    return load(yaml.safe_load(text), **kw)


def _errors(text_or_doc, **kw) -> list[str]:
    doc = yaml.safe_load(text_or_doc) if isinstance(text_or_doc, str) else text_or_doc
    with pytest.raises(ConfigError) as exc:
        load(doc, **kw)
    return exc.value.errors


def test_load_creates_everything():
    report = _load(EXAMPLE)
    assert set(report.generated_secrets) == {"generated"}
    p = Provider.objects.get(name="openai-main")
    primary = p.channels.get(name="primary")
    assert primary.get_api_key() == "sk-up"
    assert {m.model: (m.upstream_model, m.multiplier) for m in primary.models.all()} == {
        "gpt-4o": ("gpt-4o-2024-08-06", Decimal("1")),
        "gpt-4o-mini": ("", Decimal("0.25")),
    }
    assert p.channels.get(name="backup").extra_headers == {"X-Team": "blue"}
    rules = list(TransformRule.objects.filter(scope="provider", provider=p).order_by("position"))
    assert [(r.transform, r.enabled, r.phase, r.models) for r in rules] == [
        ("test_prefix", True, "request", ["gpt-4*"]),
        ("test_routing", False, "response", None),
    ]
    a = Provider.objects.get(name="anthropic")
    assert (a.max_retries, a.strip_cross_protocol_nested, a.priority) == (2, "false", 1)
    demo = ApiKey.objects.get(name="demo")
    assert demo.key_hash == crypto.hash_api_key("sk-demo-0001") and demo.capture_mode == "all"
    assert demo.allowed_models == ["*"] and demo.transform_rules.count() == 1
    generated = ApiKey.objects.get(name="generated")
    assert generated.key_hash == crypto.hash_api_key(report.generated_secrets["generated"])
    assert not generated.enabled and generated.expires_at.year == 2030
    assert TransformRule.objects.filter(scope="global").count() == 1
    s = GlobalSettings.load()
    assert (s.capture_enabled, s.capture_retention_days) == (False, 3)


def test_dump_reload_round_trip():
    _load(EXAMPLE)
    first = dump()
    text = yaml.safe_dump(first, sort_keys=False)
    assert "sk-up" not in text and "sk-demo-0001" not in text and "sk-ant" not in text
    report = load(yaml.safe_load(text))
    assert report.generated_secrets == {}  # existing keys keep their secrets
    assert dump() == first
    assert Channel.objects.get(name="primary").get_api_key() == "sk-up"
    assert ApiKey.objects.get(name="demo").key_hash == crypto.hash_api_key("sk-demo-0001")
    # JSON too.
    load(json.loads(json.dumps(first)))
    assert dump() == first


def test_dump_without_secrets_loads_into_an_empty_database():
    """A dump always loads back: into an empty database its channels arrive keyless (reported)
    and its client keys get new secrets."""
    _load(EXAMPLE)
    plain = dump()
    for model in (Provider, ApiKey, TransformRule):
        model.objects.all().delete()
    report = load(yaml.safe_load(yaml.safe_dump(plain)))
    assert sorted(report.keyless_channels) == ["anthropic/main", "openai-main/backup", "openai-main/primary"]
    assert set(report.generated_secrets) == {"demo", "generated"}
    assert dump() == plain


def test_dump_with_secrets_rebuilds_a_fresh_database():
    _load(EXAMPLE)
    full = dump(include_secrets=True)
    assert {c["api_key"] for p in full["providers"] for c in p["channels"]} == {"sk-up", "sk-up-2", "sk-ant"}
    assert "sk-demo-0001" not in yaml.safe_dump(full)  # client secrets exist only as hashes
    for model in (Provider, ApiKey, TransformRule):
        model.objects.all().delete()
    report = load(full)
    assert report.generated_secrets == {}  # restored from key_hash: the same secrets keep working
    assert dump(include_secrets=True) == full
    assert ApiKey.objects.get(name="demo").key_hash == crypto.hash_api_key("sk-demo-0001")
    assert ApiKey.objects.get(name="demo").prefix == "sk-dem"  # at most half of a short secret


def test_key_hash_errors():
    assert _errors({"api_keys": [{"name": "a", "key_hash": "xyz"}]})[0].startswith(
        "api_keys[0].key_hash: must be 64"
    )
    errs = _errors({"api_keys": [{"name": "a", "key": "sk-aaaa-000001", "key_hash": "0" * 64}]})
    assert errs[0].startswith("api_keys[0].key_hash: give either")
    assert _errors({"api_keys": [{"name": "a", "key_prefix": "sk-"}]})[0].startswith(
        "api_keys[0].key_prefix:"
    )
    load({"api_keys": [{"name": "a", "key_hash": "0" * 64}]})
    errs = _errors({"api_keys": [{"name": "b", "key_hash": "0" * 64}]})
    assert errs[0].startswith("api_keys[0].key_hash: this hash already belongs")


def test_reload_updates_and_resets_omitted_fields():
    _load(EXAMPLE)
    doc = yaml.safe_load(EXAMPLE)
    doc["providers"][1].pop("max_retries")
    doc["providers"][0]["channels"][0]["models"] = [{"model": "gpt-4o", "multiplier": 2}]
    doc["providers"][0]["transforms"] = []
    doc.pop("global_transforms")
    load(doc)
    assert Provider.objects.get(name="anthropic").max_retries == -1
    primary = Channel.objects.get(name="primary")
    assert {m.model: m.multiplier for m in primary.models.all()} == {
        "gpt-4o": 2,
        "gpt-4o-mini": Decimal("0.25"),
    }
    assert not TransformRule.objects.filter(scope="provider").exists()
    assert TransformRule.objects.filter(scope="global").count() == 1  # absent key: chain untouched


def test_prune_deletes_what_the_file_no_longer_names():
    _load(EXAMPLE)
    doc = yaml.safe_load(EXAMPLE)
    doc["providers"] = doc["providers"][:1]
    doc["providers"][0]["channels"] = doc["providers"][0]["channels"][:1]
    doc["providers"][0]["channels"][0]["models"] = ["gpt-4o"]
    doc["api_keys"] = doc["api_keys"][:1]
    load(doc)  # without prune nothing goes away
    assert Provider.objects.count() == 2 and ApiKey.objects.count() == 2
    report = load(doc, prune=True)
    assert list(Provider.objects.values_list("name", flat=True)) == ["openai-main"]
    assert list(Channel.objects.values_list("name", flat=True)) == ["primary"]
    assert list(ChannelModel.objects.values_list("model", flat=True)) == ["gpt-4o"]
    assert list(ApiKey.objects.values_list("name", flat=True)) == ["demo"]
    assert report.deleted["providers"] == ["anthropic"]


def _snapshot():
    return dump(include_secrets=True), list(ApiKey.objects.values_list("key_hash", flat=True))


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (
            lambda d: d["providers"][0]["channels"][1].update(protocol="grpc"),
            "providers[0].channels[1].protocol:",
        ),
        (
            lambda d: d["providers"][0]["channels"][0].update(base_url="ftp://x"),
            "providers[0].channels[0].base_url:",
        ),
        (
            lambda d: d["providers"][0]["channels"][0]["models"][1].update(multiplier="0"),
            "providers[0].channels[0].models[1].multiplier:",
        ),
        (
            lambda d: d["providers"][0]["channels"][0]["models"][1].update(multiplier="abc"),
            "providers[0].channels[0].models[1].multiplier: must be a decimal number",
        ),
        (
            lambda d: d["providers"][0]["transforms"][0].update(transform="no_such_transform"),
            "providers[0].transforms[0].transform: Unknown transform",
        ),
        (
            lambda d: d["providers"][0]["transforms"][0]["config"].pop("content"),
            "providers[0].transforms[0].config:",
        ),
        (
            lambda d: d["providers"][0]["transforms"][0].update(phase="response"),
            "providers[0].transforms[0].phase:",
        ),
        (
            lambda d: d["api_keys"][0]["transforms"].append({"transform": "test_routing"}),
            "api_keys[0].transforms[1].transform: test_routing is not allowed in the api_key scope",
        ),
        (lambda d: d["providers"][1].update(priority="high"), "providers[1].priority: must be an integer"),
        (lambda d: d["providers"][1].update(colour="red"), "providers[1].colour: unknown field"),
        (lambda d: d["providers"][1].pop("name"), "providers[1].name: required"),
        (lambda d: d["providers"][1].update(name="openai-main"), "providers[1].name: duplicate name"),
        (
            lambda d: d["providers"][0]["channels"][1].update(name="primary"),
            "providers[0].channels[1].name: duplicate name",
        ),
        (
            lambda d: d["providers"][0]["channels"][1].update(extra_headers={"Host": "x"}),
            "providers[0].channels[1].extra_headers:",
        ),
        (
            lambda d: d["api_keys"][1].update(key="sk-demo-0001"),
            "api_keys[1].key: this secret already belongs",
        ),
        (lambda d: d["api_keys"][1].update(key="short"), "api_keys[1].key: must be at least 12"),
        (lambda d: d["api_keys"][1].update(capture="sometimes"), "api_keys[1].capture:"),
        (lambda d: d["api_keys"][1].update(expires_at="tomorrow"), "api_keys[1].expires_at:"),
        (
            lambda d: d["api_keys"][1].update(model_redirects=[{"pattern": "(", "replace": "x"}]),
            "api_keys[1].model_redirects:",
        ),
        (lambda d: d["api_keys"][1].update(owner="nobody"), "api_keys[1].owner: no user named"),
        (lambda d: d["settings"].update(request_timeout_seconds=0), "settings.request_timeout_seconds:"),
        (
            lambda d: d["settings"].update(capture_enabled="yes"),
            "settings.capture_enabled: must be true or false",
        ),
        (lambda d: d.update(provider=[]), "provider: unknown field"),
        (lambda d: d.update(providers={"name": "x"}), "providers: must be a list"),
        (lambda d: d["providers"].append("x"), "providers[2]: must be a mapping"),
    ],
)
def test_bad_file_names_the_path_and_writes_nothing(mutate, expected):
    _load(EXAMPLE)
    before = _snapshot()
    doc = yaml.safe_load(EXAMPLE)
    doc["providers"][1]["name"] = "renamed"  # a valid change that must not land either
    mutate(doc)
    errors = _errors(doc)
    assert any(e.startswith(expected) for e in errors), errors
    assert _snapshot() == before


def test_errors_on_a_fresh_database_write_nothing():
    doc = yaml.safe_load(EXAMPLE)
    doc["providers"][1]["channels"][0]["protocol"] = "grpc"
    doc["api_keys"][1]["capture"] = "sometimes"
    errors = _errors(doc)
    assert [e.split(":")[0] for e in errors] == ["providers[1].channels[0].protocol", "api_keys[1].capture"]
    assert (
        not Provider.objects.exists() and not ApiKey.objects.exists() and not TransformRule.objects.exists()
    )


def test_naive_and_yaml_expiry_are_utc():
    load(
        yaml.safe_load(
            "api_keys: [{name: a, key: sk-aaaa-000001, expires_at: '2031-05-01T10:00:00'},"
            " {name: b, key: sk-bbbb-000001, expires_at: 2031-05-01T12:00:00+02:00}]"
        )
    )
    a, b = ApiKey.objects.order_by("name")
    assert a.expires_at == b.expires_at
    assert a.expires_at.isoformat() == "2031-05-01T10:00:00+00:00"


def test_owner_by_username():
    get_user_model().objects.create_user("alice")
    doc = yaml.safe_load(EXAMPLE)
    doc["api_keys"][1]["owner"] = "alice"
    load(doc)
    assert ApiKey.objects.get(name="generated").owner.username == "alice"
    assert dump()["api_keys"][1]["owner"] == "alice"


def test_aliases_are_canonicalised(test_registry):
    load({"global_transforms": [{"transform": "old_prefix", "config": {"content": "x"}}]})
    assert TransformRule.objects.get().transform == "test_prefix"


# -- commands --------------------------------------------------------------------------------


def test_loadconfig_command(tmp_path: Path):
    path = tmp_path / "c.yaml"
    path.write_text(EXAMPLE)
    out = io.StringIO()
    call_command("loadconfig", str(path), stdout=out)
    text = out.getvalue()
    assert "providers: 2 created" in text
    secret = next(line.split("secret ")[1].split()[0] for line in text.splitlines() if "'generated'" in line)
    assert ApiKey.objects.get(name="generated").key_hash == crypto.hash_api_key(secret)
    assert "sk-demo-0001" not in text  # a fixed key is not echoed
    out = io.StringIO()
    call_command("loadconfig", str(path), stdout=out)
    assert "secret" not in out.getvalue()  # printed only when the key is created


def test_loadconfig_command_reports_errors(tmp_path: Path):
    path = tmp_path / "c.json"
    doc = yaml.safe_load(EXAMPLE)
    doc["providers"][0]["channels"][1]["protocol"] = "grpc"
    path.write_text(json.dumps(doc))
    err = io.StringIO()
    with pytest.raises(CommandError, match="nothing was written"):
        call_command("loadconfig", str(path), stderr=err)
    assert err.getvalue().startswith("providers[0].channels[1].protocol:")
    assert not Provider.objects.exists()
    path.write_text("{not json")
    with pytest.raises(CommandError):
        call_command("loadconfig", str(path), stderr=io.StringIO())
    with pytest.raises(CommandError):
        call_command("loadconfig", str(tmp_path / "missing.yaml"), stderr=io.StringIO())


def test_dumpconfig_command(tmp_path: Path):
    _load(EXAMPLE)
    out = io.StringIO()
    call_command("dumpconfig", stdout=out)
    assert "sk-up" not in out.getvalue()
    assert yaml.safe_load(out.getvalue()) == dump()
    target = tmp_path / "dump.json"
    call_command("dumpconfig", "-o", str(target), "--include-secrets", stderr=io.StringIO())
    data = json.loads(target.read_text())
    assert data["providers"][0]["channels"][0]["api_key"] in {"sk-up", "sk-up-2"}
    assert target.stat().st_mode & 0o077 == 0


def test_demo_config_loads():
    demo = Path(__file__).resolve().parents[2] / "config" / "demo.yaml"
    report = load(yaml.safe_load(demo.read_text()))
    assert report.generated_secrets == {}
    served = {m.model: m.channel.protocol for m in ChannelModel.objects.select_related("channel")}
    assert served == {
        "demo-chat": "chat_completion",
        "demo-responses": "responses",
        "demo-messages": "messages",
        "demo-gemini": "gemini",
        "demo-image": "openai_image",
    }
    assert all(c.get_api_key() == "sk-mock" for c in Channel.objects.all())
    key = ApiKey.objects.get(name="demo")
    assert key.key_hash == crypto.hash_api_key("sk-demo-0001") and key.capture_mode == "all"


def test_ensureadmin(monkeypatch):
    users = get_user_model()
    monkeypatch.delenv("DJANGO_SUPERUSER_USERNAME", raising=False)
    monkeypatch.delenv("DJANGO_SUPERUSER_PASSWORD", raising=False)
    out = io.StringIO()
    call_command("ensureadmin", stdout=out)
    password = out.getvalue().split("password ")[1].split()[0]
    admin = users.objects.get(username="admin")
    assert admin.is_superuser and admin.check_password(password)
    out = io.StringIO()
    call_command("ensureadmin", stdout=out)
    assert "already exists" in out.getvalue()
    assert users.objects.get(username="admin").check_password(password)

    monkeypatch.setenv("DJANGO_SUPERUSER_USERNAME", "ops")
    monkeypatch.setenv("DJANGO_SUPERUSER_PASSWORD", "correct-horse-battery")
    call_command("ensureadmin", stdout=io.StringIO())
    assert users.objects.get(username="ops").check_password("correct-horse-battery")
    monkeypatch.setenv("DJANGO_SUPERUSER_PASSWORD", "another-password-1")
    call_command("ensureadmin", stdout=io.StringIO())
    ops = users.objects.get(username="ops")
    assert ops.check_password("another-password-1") and ops.is_superuser and ops.is_staff


@pytest.mark.django_db
def test_loadconfig_if_empty_never_undoes_an_operators_edits(tmp_path):
    """make run loads the demo with --if-empty: into an empty database it loads, afterwards it
    leaves the database alone (an edited provider keeps its edit)."""
    from providers.models import Provider

    out = io.StringIO()
    call_command("loadconfig", "config/demo.yaml", "--if-empty", stdout=out)
    assert "Loaded" in out.getvalue()
    Provider.objects.filter(name="demo-chat").update(priority=77)
    out = io.StringIO()
    call_command("loadconfig", "config/demo.yaml", "--if-empty", stdout=out)
    assert "Skipped" in out.getvalue()
    assert Provider.objects.get(name="demo-chat").priority == 77


def test_environment_references_in_config_files(tmp_path):
    from gateway.configenv import substitute

    text, errors = substitute(
        "a: ${PORT:-9100}\nb: ${KEY}\nc: $${LITERAL}\nd: ${MISSING}\n", {"KEY": "s3cret"}
    )
    assert text == "a: 9100\nb: s3cret\nc: ${LITERAL}\nd: \n"
    assert errors == [
        "(file): line 4: environment variable MISSING is not set (write ${MISSING:-default} "
        "to give a default)"
    ]


@pytest.mark.django_db
def test_demo_follows_mock_port(tmp_path, monkeypatch):
    monkeypatch.setenv("MOCK_PORT", "9555")
    call_command("loadconfig", "config/demo.yaml", stdout=io.StringIO())
    assert {c.base_url.split("/")[2] for c in Channel.objects.all()} == {"127.0.0.1:9555"}


def test_api_key_limits_and_ip_allow_in_the_file():
    load(
        {
            "api_keys": [
                {
                    "name": "limited",
                    "limits": {"rpm": 60, "tpm": 100000, "concurrency": 8},
                    "ip_allow": ["10.1.2.3/8", "10.0.0.0/8", "::1"],
                }
            ]
        }
    )
    key = ApiKey.objects.get(name="limited")
    assert key.limits == {"rpm": 60, "tpm": 100000, "concurrency": 8}
    assert key.ip_allow == ["10.0.0.0/8", "::1/128"]  # canonical, deduplicated
    errors = _errors(
        {"api_keys": [{"name": "bad", "limits": {"rpm": 0, "rps": 1}, "ip_allow": ["10.0.0.999"]}]}
    )
    assert any(e.startswith("api_keys[0].limits:") for e in errors), errors
    assert any(e.startswith("api_keys[0].ip_allow:") and "10.0.0.999" in e for e in errors), errors
    assert dump()["api_keys"][0]["limits"] == {"rpm": 60, "tpm": 100000, "concurrency": 8}


def test_api_key_spend_caps_in_the_file():
    load({"api_keys": [{"name": "spender", "limits": {"daily_spend": "5.00", "total_spend": 100}}]})
    assert ApiKey.objects.get(name="spender").limits == {"daily_spend": "5", "total_spend": "100"}
    errors = _errors({"api_keys": [{"name": "bad", "limits": {"daily_spend": "-1"}}]})
    assert errors[0].startswith("api_keys[0].limits:") and "USD" in errors[0]
