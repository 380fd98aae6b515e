"""Model constraints and validation: what the database refuses and what full_clean() reports."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from gateway.models import GlobalSettings
from keys.models import ApiKey
from providers.models import Channel, ChannelModel, Provider
from transforms.models import TransformRule

pytestmark = pytest.mark.django_db


def _refused(**kwargs) -> bool:
    try:
        with transaction.atomic():
            TransformRule.objects.create(transform="test_prefix", config={"content": "x"}, **kwargs)
    except IntegrityError:
        return True
    return False


@pytest.fixture
def provider() -> Provider:
    return Provider.objects.create(name="p")


@pytest.fixture
def channel(provider) -> Channel:
    return Channel.objects.create(
        provider=provider, name="c", protocol="chat_completion", base_url="http://127.0.0.1:9/v1"
    )


@pytest.fixture
def api_key() -> ApiKey:
    key = ApiKey(name="k")
    key.set_secret()
    key.save()
    return key


def test_rule_scope_owner_check_constraint(provider, api_key):
    assert _refused(scope="provider")
    assert _refused(scope="provider", provider=provider, api_key=api_key)
    assert _refused(scope="global", provider=provider)
    assert _refused(scope="api_key")
    assert _refused(scope="api_key", api_key=api_key, provider=provider)
    assert _refused(scope="global", phase="sideways")
    assert not _refused(scope="provider", provider=provider)
    assert not _refused(scope="global")
    assert not _refused(scope="api_key", api_key=api_key)


def test_rule_full_clean_reports_scope_owner_mismatch(provider):
    rule = TransformRule(scope="global", provider=provider, transform="test_prefix", config={"content": "x"})
    with pytest.raises(ValidationError):
        rule.full_clean()


def test_unique_names(provider, channel):
    with pytest.raises(IntegrityError), transaction.atomic():
        Provider.objects.create(name="p")
    with pytest.raises(IntegrityError), transaction.atomic():
        Channel.objects.create(provider=provider, name="c", protocol="messages", base_url="http://h")
    other = Provider.objects.create(name="other")
    Channel.objects.create(provider=other, name="c", protocol="messages", base_url="http://h")  # per provider
    ChannelModel.objects.create(channel=channel, model="m")
    with pytest.raises(IntegrityError), transaction.atomic():
        ChannelModel.objects.create(channel=channel, model="m")
    with pytest.raises(ValidationError) as exc:
        Provider(name="p").full_clean()
    assert "name" in exc.value.message_dict


def test_multiplier_must_be_positive(channel):
    with pytest.raises(IntegrityError), transaction.atomic():
        ChannelModel.objects.create(channel=channel, model="zero", multiplier=Decimal("0"))
    with pytest.raises(ValidationError) as exc:
        ChannelModel(channel=channel, model="neg", multiplier=Decimal("-1")).full_clean()
    assert "multiplier" in exc.value.message_dict
    ChannelModel(channel=channel, model="tiny", multiplier=Decimal("0.000000001")).full_clean()


@pytest.mark.parametrize("url", ["ftp://host/v1", "/v1", "http://", "127.0.0.1:9100", "https:///path"])
def test_bad_base_urls(provider, url):
    with pytest.raises(ValidationError) as exc:
        Channel(provider=provider, name="x", protocol="responses", base_url=url).full_clean()
    assert "base_url" in exc.value.message_dict


@pytest.mark.parametrize("url", ["http://127.0.0.1:9100/v1", "https://api.example.com", " https://a.b/v1 "])
def test_good_base_urls(provider, url):
    channel = Channel(provider=provider, name="x", protocol="responses", base_url=url)
    channel.full_clean()
    assert channel.base_url == url.strip()


@pytest.mark.parametrize(
    "headers",
    [
        {"Authorization": "x"},
        {"HOST": "x"},
        {"x-api-key": "x"},
        {"bad name": "x"},
        {"X-A": "a\r\nb"},
        {"X-A": 1},
        {f"X-{i}": "v" for i in range(17)},
        ["X-A"],
        {"X-A": "x" * 4097},
    ],
)
def test_bad_extra_headers(provider, headers):
    with pytest.raises(ValidationError) as exc:
        Channel(
            provider=provider, name="x", protocol="gemini", base_url="http://h", extra_headers=headers
        ).full_clean()
    assert "extra_headers" in exc.value.message_dict


def test_good_extra_headers(provider):
    Channel(
        provider=provider,
        name="x",
        protocol="gemini",
        base_url="http://h",
        extra_headers={"X-Team": "blue", "anthropic-beta": "a,b"},
    ).full_clean()


def test_channel_protocol_choices(provider):
    with pytest.raises(ValidationError) as exc:
        Channel(provider=provider, name="x", protocol="grpc", base_url="http://h").full_clean()
    assert "protocol" in exc.value.message_dict


def test_blank_names_refused(provider):
    for obj in (
        Provider(name="  "),
        Channel(provider=provider, name=" ", protocol="gemini", base_url="http://h"),
        ApiKey(name=" ", key_hash="0" * 64),
        ChannelModel(channel=None, model=" "),
    ):
        with pytest.raises(ValidationError):
            obj.full_clean()


def test_api_key_policy_validation():
    key = ApiKey(
        name="k",
        key_hash="1" * 64,
        allowed_models="gpt-*",
        model_redirects=[{"pattern": "(", "replace": "x"}],
    )
    with pytest.raises(ValidationError) as exc:
        key.full_clean()
    assert {"allowed_models", "model_redirects"} <= set(exc.value.message_dict)


def test_global_settings_timeouts_positive():
    settings = GlobalSettings.load()
    settings.request_timeout_seconds = 0
    with pytest.raises(ValidationError) as exc:
        settings.full_clean()
    assert "request_timeout_seconds" in exc.value.message_dict


def test_api_key_stores_only_hash_and_prefix():
    key = ApiKey(name="k")
    secret = key.set_secret()
    key.save()
    row = ApiKey.objects.filter(pk=key.pk).values().get()
    assert secret not in str(row) and row["prefix"] == secret[:12]
