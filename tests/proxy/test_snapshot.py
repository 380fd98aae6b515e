"""Building the configuration snapshot from the database, and live reload on a version bump."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from gateway import config_version
from gateway.crypto import hash_api_key
from gateway.errors import TransformFailed
from gateway.live_config import BrokenTransform, DatabaseConfigSource, build_snapshot
from gateway.models import GlobalSettings
from gateway.proxy.snapshot import SnapshotHolder
from keys.models import ApiKey
from providers.models import Channel, ChannelModel, Provider
from transforms.models import TransformRule

pytestmark = pytest.mark.django_db


def _channel(provider, name, *, key="upkey", weight=1, enabled=True, models=(("m", ""),), headers=None):
    ch = Channel(
        provider=provider,
        name=name,
        protocol="chat_completion",
        base_url="http://up.example/v1",
        weight=weight,
        enabled=enabled,
        extra_headers=headers,
    )
    ch.set_api_key(key)
    ch.save()
    for logical, upstream in models:
        ChannelModel.objects.create(channel=ch, model=logical, upstream_model=upstream)
    return ch


def test_build_snapshot_from_database():
    p_late = Provider.objects.create(name="late", priority=5)
    p_early = Provider.objects.create(
        name="early",
        priority=1,
        max_retries=2,
        channel_max_retries=1,
        strip_cross_protocol_nested="false",
        extra_fields_whitelist=["foo"],
    )
    Provider.objects.create(name="off", priority=0, enabled=False)
    c1 = _channel(
        p_early, "a", key="secret-a", models=(("m", "m-up"), ("other", "")), headers={"X-Org": "o1"}
    )
    _channel(p_early, "zero", weight=0)
    _channel(p_early, "disabled", enabled=False)
    _channel(p_late, "b")
    key = ApiKey(
        name="k",
        allowed_models=["m*"],
        model_redirects=[{"pattern": "alias-.*", "replace": "m"}],
        capture_mode="abnormal",
        expires_at=timezone.now() + dt.timedelta(days=1),
    )
    secret = key.set_secret()
    key.save()
    TransformRule.objects.create(scope="global", transform="no_such_transform", position=0)
    TransformRule.objects.create(
        scope="global", transform="stream_force", position=1, enabled=False, config={"enabled": True}
    )
    TransformRule.objects.create(
        scope="provider",
        provider=p_early,
        transform="stream_force",
        position=0,
        config={"enabled": True},
        models=None,
    )
    TransformRule.objects.create(
        scope="provider",
        provider=p_early,
        transform="stream_force",
        position=1,
        config={"enabled": False},
        models=[],
    )
    gs = GlobalSettings.load()
    gs.capture_enabled = True
    gs.save()

    snap = build_snapshot((42, 3))
    assert (snap.version, snap.redis_version) == (42, 3)
    assert [p.name for p in snap.providers] == ["early", "late"]
    early = snap.providers[0]
    assert (early.max_retries, early.channel_max_retries, early.strip_nested) == (2, 1, False)
    assert early.extra_fields_whitelist == ("foo",)
    assert [c.name for c in early.channels] == ["a", "zero"]  # disabled channels are not in the snapshot
    ch = early.channels[0]
    assert ch.api_key == "secret-a" and ch.models == {"m": "m-up", "other": "other"}
    assert ch.extra_headers == (("X-Org", "o1"),) and ch.id == c1.id
    # routes: weight-0 channels never routed, providers in priority order
    assert [(r.provider.name, [c.name for c, _ in r.channels]) for r in snap.routes["m"]] == [
        ("early", ["a"]),
        ("late", ["b"]),
    ]
    assert snap.model_names == ["m", "other"]
    # chains: the unknown transform becomes a rule that fails at run time; disabled rules are omitted
    [broken] = snap.global_chain
    assert isinstance(broken.transform, BrokenTransform) and broken.type_id == "no_such_transform"
    with pytest.raises(TransformFailed):
        broken.transform.apply_request(None, None)
    force, never = early.chain
    assert force.type_id == "stream_force" and force.models is None and force.scope == "provider"
    # null matches every model; an empty list is kept as such and matches none
    assert force.matches("request", "anything") and never.models == ()
    assert not never.matches("request", "anything")
    k = snap.keys_by_hash[hash_api_key(secret)]
    assert k.allowed_models == ("m*",) and k.capture_mode == "abnormal"
    assert k.redirects[0][0].fullmatch("alias-1") and k.redirects[0][1] == "m"
    assert k.expires_at == pytest.approx(key.expires_at.timestamp())
    assert snap.settings.capture_enabled is True


def test_key_scope_rules_not_allowed_for_keys_are_dropped():
    key = ApiKey(name="k")
    key.set_secret()
    key.save()
    TransformRule.objects.create(
        scope="api_key", api_key=key, transform="stream_force", config={"enabled": True}
    )
    snap = build_snapshot()
    assert snap.keys_by_hash[key.key_hash].chain == ()


def test_reload_only_when_version_moves(django_capture_on_commit_callbacks):
    holder = SnapshotHolder(DatabaseConfigSource())
    assert holder.reload_if_changed()
    assert not holder.reload_if_changed()
    first = holder.current
    with django_capture_on_commit_callbacks(execute=True):
        Provider.objects.create(name="new")
        config_version.bump()
    assert holder.reload_if_changed()
    assert holder.current is not first and [p.name for p in holder.current.providers] == ["new"]
    assert holder.current.version == config_version.current()[0]


def test_last_used_is_written_in_batches():
    key = ApiKey(name="k")
    key.set_secret()
    key.save()
    holder = SnapshotHolder(DatabaseConfigSource())
    holder.touch(key.id)
    assert ApiKey.objects.get(pk=key.pk).last_used_at is None
    holder._flush_last_used()
    assert ApiKey.objects.get(pk=key.pk).last_used_at is not None
