"""Every save path bumps the config version (once per transaction)."""

from __future__ import annotations

import pytest
from django.db import transaction

from gateway import config_version
from gateway.configfile import load
from gateway.models import GlobalSettings
from keys.models import ApiKey
from providers.models import Channel, ChannelModel, Provider
from transforms.models import TransformRule

pytestmark = pytest.mark.django_db


@pytest.fixture
def bumps(monkeypatch) -> list[int]:
    calls: list[int] = []
    monkeypatch.setattr(config_version, "bump", lambda: calls.append(1))
    return calls


def test_each_config_model_bumps(bumps, run_on_commit):
    with run_on_commit(execute=True):
        provider = Provider.objects.create(name="p")
    assert len(bumps) == 1
    steps = [
        lambda: Channel.objects.create(provider=provider, name="c", protocol="gemini", base_url="http://h"),
        lambda: ChannelModel.objects.create(channel=Channel.objects.get(), model="m"),
        lambda: TransformRule.objects.create(
            scope="global", transform="test_prefix", config={"content": "x"}
        ),
        lambda: GlobalSettings.load(),
        lambda: ApiKey(name="k", key_hash="a" * 64).save(),
        lambda: ChannelModel.objects.get().delete(),
        lambda: TransformRule.objects.get().delete(),
        lambda: ApiKey.objects.get().delete(),
    ]
    for i, step in enumerate(steps, start=2):
        with run_on_commit(execute=True):
            step()
        assert len(bumps) == i, i


def test_global_chain_proxy_model_bumps(bumps, run_on_commit):
    from transforms.models import GlobalTransformRule

    with run_on_commit(execute=True):
        GlobalTransformRule.objects.create(scope="global", transform="test_prefix", config={"content": "x"})
    with run_on_commit(execute=True):
        GlobalTransformRule.objects.get().delete()
    assert len(bumps) == 2


def test_one_bump_per_transaction(bumps, run_on_commit):
    with run_on_commit(execute=True), transaction.atomic():
        provider = Provider.objects.create(name="p")
        for i in range(3):
            Channel.objects.create(provider=provider, name=f"c{i}", protocol="gemini", base_url="http://h")
        provider.delete()  # cascades: several post_delete signals
    assert len(bumps) == 1


def test_rolled_back_change_does_not_bump(bumps, run_on_commit):
    with run_on_commit(execute=True):
        try:
            with transaction.atomic():
                Provider.objects.create(name="p")
                raise RuntimeError
        except RuntimeError:
            pass
    assert bumps == []


def test_last_used_bookkeeping_does_not_bump(bumps, run_on_commit):
    key = ApiKey(name="k", key_hash="b" * 64)
    key.save()
    bumps.clear()
    with run_on_commit(execute=True):
        key.save(update_fields=["last_used_at"])
    assert bumps == []


def test_loadconfig_bumps_once(bumps, run_on_commit):
    doc = {
        "providers": [
            {
                "name": f"p{i}",
                "channels": [
                    {
                        "name": "c",
                        "protocol": "gemini",
                        "base_url": "http://h",
                        "api_key": "sk-x",
                        "models": ["m1", "m2"],
                    }
                ],
            }
            for i in range(3)
        ],
        "api_keys": [{"name": "k", "key": "sk-demo-000001"}],
        "settings": {"capture_enabled": False},
    }
    with run_on_commit(execute=True):
        load(doc)
    assert len(bumps) == 1


def test_real_bump_changes_the_stored_version(run_on_commit):
    before = config_version.current()[0]
    with run_on_commit(execute=True):
        Provider.objects.create(name="p")
    assert config_version.current()[0] != before


def test_reading_settings_on_a_fresh_database_does_not_bump(bumps, run_on_commit):
    """The capture writer's size check read the settings through get_or_create: on a database
    without the row it saved one, which bumped the version and reloaded every worker."""
    from captures import retention

    with run_on_commit(execute=True):
        retention.enforce_size()
        retention.enforce()
        GlobalSettings.current()
    assert bumps == []
    assert not GlobalSettings.objects.exists()
