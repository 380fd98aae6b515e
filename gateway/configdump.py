"""``dumpconfig``: the stored configuration in the ``loadconfig`` file format.

Fields at their model default are left out (a reload resets omitted fields to the defaults, so
nothing is lost); the field lists come from the models (``*.services``), like the file's schema.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.db import models as dj_models

from gateway.models import GlobalSettings
from gateway.services import SETTINGS_FIELDS
from keys.models import ApiKey
from keys.services import API_KEY_FIELDS
from providers.models import Provider, TriState
from providers.services import PROVIDER_FIELDS
from transforms.models import Scope, TransformRule


def _default(obj: dj_models.Model, name: str) -> Any:
    return obj._meta.get_field(name).get_default()


def _nondefault(obj: dj_models.Model, names: list[str]) -> dict[str, Any]:
    return {n: getattr(obj, n) for n in names if getattr(obj, n) != _default(obj, n)}


def _decimal_out(value: Decimal) -> str:
    return format(value.normalize(), "f")


def _rules_out(rules: list[TransformRule]) -> list[dict[str, Any]]:
    out = []
    for rule in rules:
        item: dict[str, Any] = {"transform": rule.transform}
        if not rule.enabled:
            item["enabled"] = False
        item["phase"] = rule.phase
        if rule.models is not None:
            item["models"] = rule.models
        item["config"] = rule.config or {}
        out.append(item)
    return out


def _provider_out(p: Provider, rules: list[TransformRule], include_secrets: bool) -> dict[str, Any]:
    item: dict[str, Any] = {"name": p.name, "priority": p.priority}
    item.update(
        _nondefault(
            p, [k for k in PROVIDER_FIELDS if k not in ("name", "priority", "strip_cross_protocol_nested")]
        )
    )
    if isinstance(item.get("multiplier"), Decimal):
        item["multiplier"] = _decimal_out(item["multiplier"])
    if p.strip_cross_protocol_nested != TriState.INHERIT:
        item["strip_cross_protocol_nested"] = p.strip_nested_override
    channels = []
    for c in sorted(p.channels.all(), key=lambda c: c.name):
        citem: dict[str, Any] = {"name": c.name, "protocol": c.protocol, "base_url": c.base_url}
        if include_secrets and c.has_api_key:
            citem["api_key"] = c.get_api_key()
        citem["weight"] = c.weight
        citem.update(_nondefault(c, ["enabled", "extra_headers"]))
        models = []
        for m in sorted(c.models.all(), key=lambda m: m.model):
            mitem: dict[str, Any] = {"model": m.model}
            if m.upstream_model:
                mitem["upstream_model"] = m.upstream_model
            if m.multiplier != Decimal("1"):
                mitem["multiplier"] = _decimal_out(m.multiplier)
            if m.price:
                mitem["price"] = dict(m.price)
            models.append(mitem)
        citem["models"] = models
        channels.append(citem)
    item["channels"] = channels
    item["transforms"] = _rules_out(rules)
    return item


def _api_key_out(k: ApiKey, rules: list[TransformRule], include_secrets: bool) -> dict[str, Any]:
    kitem: dict[str, Any] = {"name": k.name}
    if include_secrets:
        kitem["key_hash"] = k.key_hash
        kitem["key_prefix"] = k.prefix
    if not k.enabled:
        kitem["enabled"] = False
    if k.expires_at is not None:
        kitem["expires_at"] = k.expires_at.isoformat()
    kitem["capture_mode"] = k.capture_mode
    if k.allowed_models is not None:
        kitem["allowed_models"] = k.allowed_models
    # every other field the write path accepts, when set: a new field is dumped without an edit here
    handled = {"name", "enabled", "expires_at", "capture_mode", "allowed_models", "owner"}
    kitem.update(
        {
            n: v
            for n, v in _nondefault(k, [f for f in API_KEY_FIELDS if f not in handled]).items()
            if v not in (None, "", [], {})
        }
    )
    if k.owner is not None:
        kitem["owner"] = k.owner.get_username()
    kitem["transforms"] = _rules_out(rules)
    return kitem


def dump(*, include_secrets: bool = False) -> dict[str, Any]:
    """The stored configuration in the file format.

    With ``include_secrets``: upstream channel keys in clear, and each client key's stored hash
    and prefix (``key_hash``, ``key_prefix``), so a backup restores working client keys on an
    instance with the same ``GATEWAY_SECRETS_KEY`` (the hash is keyed by it). Client secrets
    themselves are never available: only their hashes are stored."""
    by_provider: dict[int, list[TransformRule]] = {}
    by_key: dict[int, list[TransformRule]] = {}
    global_rules: list[TransformRule] = []
    for rule in TransformRule.objects.order_by("position", "id"):
        if rule.scope == Scope.PROVIDER:
            by_provider.setdefault(rule.provider_id, []).append(rule)
        elif rule.scope == Scope.API_KEY:
            by_key.setdefault(rule.api_key_id, []).append(rule)
        else:
            global_rules.append(rule)
    providers = [
        _provider_out(p, by_provider.get(p.pk, []), include_secrets)
        for p in Provider.objects.prefetch_related("channels__models").order_by("priority", "name")
    ]
    keys = [
        _api_key_out(k, by_key.get(k.pk, []), include_secrets)
        for k in ApiKey.objects.select_related("owner").order_by("name", "id")
    ]
    settings_obj = GlobalSettings.current()
    return {
        "providers": providers,
        "global_transforms": _rules_out(global_rules),
        "api_keys": keys,
        "settings": {name: getattr(settings_obj, name) for name in SETTINGS_FIELDS},
    }
