"""Declarative configuration: the file format of ``loadconfig`` and ``dumpconfig``.

Shape (YAML or JSON)::

    providers:
      - name: openai-main
        priority: 0
        channels:
          - {name: primary, protocol: chat_completion, base_url: "http://127.0.0.1:9100/v1",
             api_key: sk-up, weight: 1, models: [{model: gpt-4o, upstream_model: gpt-4o-2024-08-06}]}
        transforms:
          - {transform: prompt_inject_system, phase: request, models: ["gpt-4*"], config: {...}}
    global_transforms: []
    api_keys:
      - {name: demo, key: sk-demo-0001, capture: all, allowed_models: ["*"], transforms: []}
    settings: {capture_enabled: true}

Loading rules (also in the README):

- Providers, channels, channel models and API keys are created or updated **by name** (channel
  models by ``model``). An entry describes the whole object: a field it leaves out takes the
  model's default, except secrets: a channel's ``api_key`` and an API key's ``key`` are kept when
  left out (so a dump without secrets reloads cleanly). A new channel needs ``api_key``; a new
  API key without ``key`` (or ``key_hash`` from a ``--include-secrets`` dump) gets a generated
  secret, reported once.
- Chains (a provider's or key's ``transforms``, ``global_transforms``) are ordered and unnamed:
  when the key is present the stored chain is replaced by the file's; when absent it is left alone.
- ``settings``, when present, describes the whole GlobalSettings row (omitted fields: defaults).
- ``prune`` deletes what a list present in the file no longer names (providers, a provider's
  channels, a channel's models, API keys). A list key that is absent prunes nothing.
- Everything runs in one transaction; any error anywhere means nothing is written. Errors name
  the exact path of the bad field (``providers[0].channels[1].protocol: ...``). Every object goes
  through ``full_clean()`` (rules through ``transforms.validation.validate_rule``), exactly like
  the admin and the REST API. The config version is bumped once, on commit.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

import orjson
import yaml
from django.contrib.auth import get_user_model
from django.core.exceptions import NON_FIELD_ERRORS, ValidationError
from django.db import models as dj_models
from django.db import transaction

from gateway.models import GlobalSettings
from keys.models import PREFIX_LEN, ApiKey
from providers.models import Channel, ChannelModel, Provider
from transforms.models import TransformRule
from transforms.registry import canonical_id

MIN_SECRET_LEN = 12
_HEX64 = re.compile(r"^[0-9a-f]{64}$")


class ConfigError(Exception):
    """A bad configuration file: ``errors`` holds one ``"path: message"`` line per problem."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__("\n".join(errors))
        self.errors = errors


@dataclass
class LoadReport:
    """What a load did, per kind: created / updated / deleted names, and generated secrets."""

    created: dict[str, list[str]] = field(default_factory=dict)
    updated: dict[str, list[str]] = field(default_factory=dict)
    deleted: dict[str, list[str]] = field(default_factory=dict)
    generated_secrets: dict[str, str] = field(default_factory=dict)

    def note(self, kind: str, what: str, name: str) -> None:
        getattr(self, what).setdefault(kind, []).append(name)

    def summary(self) -> str:
        kinds = sorted(set(self.created) | set(self.updated) | set(self.deleted))
        parts = [
            f"{kind}: {len(self.created.get(kind, []))} created, {len(self.updated.get(kind, []))} updated, "
            f"{len(self.deleted.get(kind, []))} deleted"
            for kind in kinds
        ]
        return "; ".join(parts) or "nothing to do"


# ---------------------------------------------------------------------------------------------
# Reading and writing files


def parse_text(text: str, *, json_format: bool = False) -> Any:
    try:
        return orjson.loads(text) if json_format else yaml.safe_load(text)
    except (orjson.JSONDecodeError, yaml.YAMLError) as exc:
        raise ConfigError([f"(file): not valid {'JSON' if json_format else 'YAML'}: {exc}"]) from exc


def read_file(path: str | Path) -> Any:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError([f"(file): cannot read {path}: {exc.strerror or exc}"]) from exc
    return parse_text(text, json_format=path.suffix.lower() == ".json")


def render(data: dict[str, Any], fmt: str = "yaml") -> str:
    if fmt == "json":
        return orjson.dumps(data, option=orjson.OPT_INDENT_2).decode() + "\n"
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, default_flow_style=False)


# ---------------------------------------------------------------------------------------------
# Structure: types, unknown keys, required keys, duplicate names. Checked before anything is
# written so the apply step can trust the shapes.

_STR, _BOOL, _INT, _NUM, _LIST, _DICT, _DECIMAL, _DATETIME, _TRISTATE = (
    "a string", "true or false", "an integer", "a number", "a list", "a mapping", "a decimal number",
    "an ISO 8601 date-time", "true, false, null or inherit")

# file key -> (expected type, nullable, required)
PROVIDER_FIELDS: dict[str, tuple[str, bool, bool]] = {
    "name": (_STR, False, True), "enabled": (_BOOL, False, False), "priority": (_INT, False, False),
    "max_retries": (_INT, False, False), "channel_max_retries": (_INT, False, False),
    "channel_retry_interval_ms": (_INT, False, False), "request_timeout_seconds": (_NUM, True, False),
    "circuit_breaker_enabled": (_BOOL, False, False), "strip_cross_protocol_nested": (_TRISTATE, True, False),
    "affinity_mode": (_STR, False, False), "affinity_failback_seconds": (_INT, False, False),
    "extra_fields_whitelist": (_LIST, True, False), "channels": (_LIST, False, False),
    "transforms": (_LIST, False, False),
}
CHANNEL_FIELDS = {
    "name": (_STR, False, True), "protocol": (_STR, False, True), "base_url": (_STR, False, True),
    "api_key": (_STR, True, False), "weight": (_INT, False, False), "enabled": (_BOOL, False, False),
    "extra_headers": (_DICT, True, False), "models": (_LIST, False, False),
}
MODEL_FIELDS = {
    "model": (_STR, False, True), "upstream_model": (_STR, True, False), "multiplier": (_DECIMAL, False, False),
}
RULE_FIELDS = {
    "transform": (_STR, False, True), "enabled": (_BOOL, False, False), "phase": (_STR, False, False),
    "models": (_LIST, True, False), "config": (_DICT, True, False),
}
API_KEY_FIELDS = {
    "name": (_STR, False, True), "key": (_STR, True, False), "key_hash": (_STR, True, False),
    "key_prefix": (_STR, True, False), "enabled": (_BOOL, False, False),
    "expires_at": (_DATETIME, True, False), "allowed_models": (_LIST, True, False),
    "model_redirects": (_LIST, True, False), "capture": (_STR, False, False), "owner": (_STR, True, False),
    "transforms": (_LIST, False, False),
}
TOP_FIELDS = {
    "providers": (_LIST, True, False), "global_transforms": (_LIST, True, False),
    "api_keys": (_LIST, True, False), "settings": (_DICT, True, False),
}
_SETTINGS_SKIP = {"id", "updated_at"}


def _settings_fields() -> dict[str, tuple[str, bool, bool]]:
    out = {}
    for f in GlobalSettings._meta.concrete_fields:
        if f.name in _SETTINGS_SKIP:
            continue
        kind = (_BOOL if isinstance(f, dj_models.BooleanField) else _INT if isinstance(f, dj_models.IntegerField)
                else _NUM if isinstance(f, dj_models.FloatField | dj_models.DecimalField) else _STR)
        out[f.name] = (kind, f.null, False)
    return out


def _type_ok(kind: str, value: Any) -> bool:
    if kind == _STR:
        return isinstance(value, str)
    if kind == _BOOL:
        return isinstance(value, bool)
    if kind == _INT:
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == _NUM:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind == _LIST:
        return isinstance(value, list)
    if kind == _DICT:
        return isinstance(value, dict)
    if kind == _DECIMAL:
        if isinstance(value, bool):
            return False
        if isinstance(value, int | float):
            return True
        if isinstance(value, str):
            try:
                return Decimal(value).is_finite()
            except InvalidOperation:
                return False
        return False
    if kind == _DATETIME:
        if isinstance(value, dt.datetime):
            return True
        if isinstance(value, str):
            try:
                dt.datetime.fromisoformat(value)
            except ValueError:
                return False
            return True
        return False
    if kind == _TRISTATE:
        return isinstance(value, bool) or value in ("inherit", "true", "false")
    return True


class _Collector:
    def __init__(self) -> None:
        self.errors: list[str] = []

    def add(self, path: str, message: str) -> None:
        self.errors.append(f"{path}: {message}")

    def __bool__(self) -> bool:
        return bool(self.errors)


def _check_object(value: Any, path: str, spec: dict[str, tuple[str, bool, bool]], errs: _Collector) -> bool:
    if not isinstance(value, dict):
        errs.add(path, "must be a mapping")
        return False
    ok = True
    for key in value:
        if key not in spec:
            errs.add(f"{path}.{key}", f"unknown field (expected one of: {', '.join(spec)})")
            ok = False
    for key, (kind, nullable, required) in spec.items():
        if key not in value:
            if required:
                errs.add(f"{path}.{key}", "required")
                ok = False
            continue
        v = value[key]
        if v is None:
            if not nullable:
                errs.add(f"{path}.{key}", f"must be {kind}, not null")
                ok = False
        elif not _type_ok(kind, v):
            errs.add(f"{path}.{key}", f"must be {kind}")
            ok = False
        elif kind == _STR and required and not v.strip():
            errs.add(f"{path}.{key}", "must not be empty")
            ok = False
    return ok


def _check_unique(items: list[Any], key: str, path: str, errs: _Collector) -> None:
    seen: dict[str, int] = {}
    for i, item in enumerate(items):
        if isinstance(item, dict) and isinstance(item.get(key), str):
            name = item[key].strip()
            if name in seen:
                errs.add(f"{path}[{i}].{key}", f"duplicate {key} {name!r} (also at {path}[{seen[name]}])")
            else:
                seen[name] = i


def _normalize_models(channel: dict[str, Any]) -> None:
    """``models: [gpt-4o]`` is short for ``models: [{model: gpt-4o}]``."""
    if isinstance(channel.get("models"), list):
        channel["models"] = [{"model": m} if isinstance(m, str) else m for m in channel["models"]]


def _check_rules(rules: list[Any], path: str, errs: _Collector) -> None:
    for j, rule in enumerate(rules):
        _check_object(rule, f"{path}[{j}]", RULE_FIELDS, errs)


def check_structure(data: Any) -> list[str]:
    """Shape errors (``"path: message"``); empty when the apply step may run."""
    errs = _Collector()
    if data is None:
        data = {}
    if not _check_object(data, "(top level)", TOP_FIELDS, errs):
        return [e.replace("(top level).", "", 1) for e in errs.errors]
    providers = data.get("providers") or []
    for i, p in enumerate(providers):
        ppath = f"providers[{i}]"
        if not _check_object(p, ppath, PROVIDER_FIELDS, errs):
            continue
        channels = p.get("channels") or []
        for k, c in enumerate(channels):
            cpath = f"{ppath}.channels[{k}]"
            if isinstance(c, dict):
                _normalize_models(c)
            if not _check_object(c, cpath, CHANNEL_FIELDS, errs):
                continue
            for m_i, m in enumerate(c.get("models") or []):
                _check_object(m, f"{cpath}.models[{m_i}]", MODEL_FIELDS, errs)
            _check_unique(c.get("models") or [], "model", f"{cpath}.models", errs)
        _check_unique(channels, "name", f"{ppath}.channels", errs)
        _check_rules(p.get("transforms") or [], f"{ppath}.transforms", errs)
    _check_unique(providers, "name", "providers", errs)
    _check_rules(data.get("global_transforms") or [], "global_transforms", errs)
    keys = data.get("api_keys") or []
    for i, k in enumerate(keys):
        kpath = f"api_keys[{i}]"
        if not _check_object(k, kpath, API_KEY_FIELDS, errs):
            continue
        secret = k.get("key")
        if isinstance(secret, str) and (len(secret) < MIN_SECRET_LEN or secret != secret.strip() or " " in secret):
            errs.add(f"{kpath}.key", f"must be at least {MIN_SECRET_LEN} characters without spaces")
        key_hash = k.get("key_hash")
        if key_hash is not None:
            if secret:
                errs.add(f"{kpath}.key_hash", "give either key or key_hash, not both")
            elif not _HEX64.match(key_hash):
                errs.add(f"{kpath}.key_hash", "must be 64 lowercase hex characters (as written by dumpconfig)")
        elif k.get("key_prefix") is not None:
            errs.add(f"{kpath}.key_prefix", "only meaningful together with key_hash")
        _check_rules(k.get("transforms") or [], f"{kpath}.transforms", errs)
    _check_unique(keys, "name", "api_keys", errs)
    if isinstance(data.get("settings"), dict):
        _check_object(data["settings"], "settings", _settings_fields(), errs)
    return [e.replace("(top level).", "", 1) for e in errs.errors]


# ---------------------------------------------------------------------------------------------
# Applying


def _default(model: type[dj_models.Model], name: str) -> Any:
    return model._meta.get_field(name).get_default()


def _tristate_in(value: Any) -> str:
    if value is None:
        return "inherit"
    if isinstance(value, bool):
        return "true" if value else "false"
    return value


def _aware(value: str | dt.datetime) -> dt.datetime:
    """An expiry without a time zone is read as UTC (the gateway's time zone)."""
    when = dt.datetime.fromisoformat(value) if isinstance(value, str) else value
    return when if when.tzinfo is not None else when.replace(tzinfo=dt.UTC)


def _decimal_in(value: Any) -> Decimal:
    # A YAML float goes through its shortest repr, never its binary expansion.
    return Decimal(str(value)) if isinstance(value, float) else Decimal(value)


def _decimal_out(value: Decimal) -> str:
    text = format(value.normalize(), "f")
    return text


class _Applier:
    def __init__(self, prune: bool) -> None:
        self.prune = prune
        self.errs = _Collector()
        self.report = LoadReport()

    # -- helpers --------------------------------------------------------------------------
    def clean_save(self, obj: dj_models.Model, path: str, aliases: dict[str, str] | None = None,
                   kind: str | None = None, label: str | None = None) -> bool:
        created = obj.pk is None
        try:
            obj.full_clean()
        except ValidationError as exc:
            details = exc.message_dict if hasattr(exc, "error_dict") else {NON_FIELD_ERRORS: exc.messages}
            for name, messages in details.items():
                where = path if name == NON_FIELD_ERRORS else f"{path}.{(aliases or {}).get(name, name)}"
                self.errs.add(where, " ".join(messages))
            return False
        obj.save()
        if kind:
            self.report.note(kind, "created" if created else "updated", label or str(obj))
        return True

    def set_fields(self, obj: dj_models.Model, entry: dict[str, Any], mapping: dict[str, str]) -> None:
        """mapping: file key -> model field. Omitted keys take the field's default."""
        for key, attr in mapping.items():
            value = entry[key] if key in entry else _default(type(obj), attr)
            setattr(obj, attr, value)

    def replace_chain(self, rules: list[dict[str, Any]], path: str, *, scope: str,
                      provider: Provider | None = None, api_key: ApiKey | None = None) -> None:
        TransformRule.objects.filter(scope=scope, provider=provider, api_key=api_key).delete()
        for j, entry in enumerate(rules):
            rule = TransformRule(
                scope=scope, provider=provider, api_key=api_key, position=j,
                transform=canonical_id(entry["transform"]),
                enabled=entry.get("enabled", True), phase=entry.get("phase", "request"),
                models=entry.get("models"), config=entry.get("config") or {},
            )
            self.clean_save(rule, f"{path}[{j}]")

    def prune_missing(self, stored: dj_models.QuerySet, key: str, entries: list[dict[str, Any]], kind: str,
                      label: Callable[[Any], str]) -> None:
        """With ``prune``, delete the stored objects whose ``key`` no entry of the file names."""
        if not self.prune:
            return
        names = {e[key].strip() for e in entries}
        for obj in stored.exclude(**{f"{key}__in": names}):
            self.report.note(kind, "deleted", label(obj))
            obj.delete()

    # -- kinds ----------------------------------------------------------------------------
    def providers(self, entries: list[dict[str, Any]]) -> None:
        mapping = {k: k for k in PROVIDER_FIELDS if k not in ("name", "channels", "transforms")}
        for i, entry in enumerate(entries):
            path = f"providers[{i}]"
            name = entry["name"].strip()
            obj = Provider.objects.filter(name=name).first() or Provider(name=name)
            self.set_fields(obj, entry, mapping)
            obj.strip_cross_protocol_nested = _tristate_in(entry.get("strip_cross_protocol_nested"))
            if not self.clean_save(obj, path, kind="providers", label=name):
                continue
            if "channels" in entry:
                self.channels(obj, entry["channels"], path)
            if "transforms" in entry:
                self.replace_chain(entry["transforms"], f"{path}.transforms", scope="provider", provider=obj)
        self.prune_missing(Provider.objects.all(), "name", entries, "providers", lambda p: p.name)

    def channels(self, provider: Provider, entries: list[dict[str, Any]], ppath: str) -> None:
        mapping = {"protocol": "protocol", "base_url": "base_url", "weight": "weight", "enabled": "enabled",
                   "extra_headers": "extra_headers"}
        for k, entry in enumerate(entries):
            path = f"{ppath}.channels[{k}]"
            name = entry["name"].strip()
            obj = Channel.objects.filter(provider=provider, name=name).first() or Channel(provider=provider, name=name)
            self.set_fields(obj, entry, mapping)
            secret = entry.get("api_key") or ""
            if secret:
                obj.set_api_key(secret)
            elif obj.pk is None:
                self.errs.add(f"{path}.api_key", "required for a new channel")
                continue
            if not self.clean_save(obj, path, kind="channels", label=f"{provider.name}/{name}"):
                continue
            if "models" in entry:
                self.channel_models(obj, entry["models"], path)
        self.prune_missing(provider.channels.all(), "name", entries, "channels",
                           lambda c: f"{provider.name}/{c.name}")

    def channel_models(self, channel: Channel, entries: list[dict[str, Any]], cpath: str) -> None:
        for m_i, entry in enumerate(entries):
            path = f"{cpath}.models[{m_i}]"
            name = entry["model"].strip()
            obj = ChannelModel.objects.filter(channel=channel, model=name).first() or ChannelModel(
                channel=channel, model=name)
            obj.upstream_model = entry.get("upstream_model") or ""
            obj.multiplier = _decimal_in(entry["multiplier"]) if "multiplier" in entry else Decimal("1")
            self.clean_save(obj, path, kind="models", label=f"{channel}:{name}")
        self.prune_missing(channel.models.all(), "model", entries, "models", lambda m: f"{channel}:{m.model}")

    def api_keys(self, entries: list[dict[str, Any]]) -> None:
        from gateway.crypto import hash_api_key

        mapping = {"enabled": "enabled", "expires_at": "expires_at", "allowed_models": "allowed_models",
                   "model_redirects": "model_redirects", "capture": "capture_mode"}
        aliases = {"capture_mode": "capture", "key_hash": "key", "prefix": "key"}
        users = get_user_model()
        for i, entry in enumerate(entries):
            path = f"api_keys[{i}]"
            name = entry["name"].strip()
            if entry.get("expires_at") is not None:
                entry = {**entry, "expires_at": _aware(entry["expires_at"])}
            found = list(ApiKey.objects.filter(name=name)[:2])
            if len(found) > 1:
                self.errs.add(f"{path}.name", f"several stored API keys are named {name!r}; rename them first")
                continue
            obj = found[0] if found else ApiKey(name=name)
            self.set_fields(obj, entry, mapping)
            owner = entry.get("owner")
            if owner:
                user = users.objects.filter(**{users.USERNAME_FIELD: owner}).first()
                if user is None:
                    self.errs.add(f"{path}.owner", f"no user named {owner!r}")
                    continue
                obj.owner = user
            else:
                obj.owner = None
            secret = entry.get("key")
            generated = None
            if secret:
                if obj.key_hash != hash_api_key(secret):
                    if ApiKey.objects.filter(key_hash=hash_api_key(secret)).exclude(pk=obj.pk).exists():
                        self.errs.add(f"{path}.key", "this secret already belongs to another API key")
                        continue
                    obj.set_secret(secret)
            elif entry.get("key_hash"):
                if obj.key_hash != entry["key_hash"]:
                    if ApiKey.objects.filter(key_hash=entry["key_hash"]).exclude(pk=obj.pk).exists():
                        self.errs.add(f"{path}.key_hash", "this hash already belongs to another API key")
                        continue
                    obj.key_hash = entry["key_hash"]
                    obj.prefix = (entry.get("key_prefix") or "")[:PREFIX_LEN]
            elif obj.pk is None:
                generated = obj.set_secret()
            if not self.clean_save(obj, path, aliases, kind="api_keys", label=name):
                continue
            if generated:
                self.report.generated_secrets[name] = generated
            if "transforms" in entry:
                self.replace_chain(entry["transforms"], f"{path}.transforms", scope="api_key", api_key=obj)
        self.prune_missing(ApiKey.objects.all(), "name", entries, "api_keys", lambda k: k.name)

    def settings(self, entry: dict[str, Any]) -> None:
        obj = GlobalSettings.load()
        self.set_fields(obj, entry, {k: k for k in _settings_fields()})
        self.clean_save(obj, "settings", kind="settings", label="global settings")


def load(data: Any, *, prune: bool = False) -> LoadReport:
    """Apply a parsed configuration document in one transaction; raise ConfigError (and write
    nothing) when anything in it is wrong."""
    errors = check_structure(data)
    if errors:
        raise ConfigError(errors)
    data = data or {}
    applier = _Applier(prune)
    with transaction.atomic():
        if "providers" in data and data["providers"] is not None:
            applier.providers(data["providers"])
        if data.get("global_transforms") is not None:
            applier.replace_chain(data["global_transforms"], "global_transforms", scope="global")
        if "api_keys" in data and data["api_keys"] is not None:
            applier.api_keys(data["api_keys"])
        if data.get("settings") is not None:
            applier.settings(data["settings"])
        if applier.errs:
            # Leaving the block with an exception rolls everything back, bump included.
            raise ConfigError(applier.errs.errors)
    return applier.report


def load_file(path: str | Path, *, prune: bool = False) -> LoadReport:
    return load(read_file(path), prune=prune)


# ---------------------------------------------------------------------------------------------
# Dumping


def _rules_out(rules) -> list[dict[str, Any]]:
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


def _nondefault(obj: dj_models.Model, names: list[str]) -> dict[str, Any]:
    return {n: getattr(obj, n) for n in names if getattr(obj, n) != _default(type(obj), n)}


def dump(*, include_secrets: bool = False) -> dict[str, Any]:
    """The stored configuration in the file format.

    With ``include_secrets``: upstream channel keys in clear, and each client key's stored hash
    and prefix (``key_hash``, ``key_prefix``), so a backup restores working client keys on an
    instance with the same ``GATEWAY_SECRETS_KEY`` (the hash is keyed by it). Client secrets
    themselves are never available: only their hashes are stored."""
    rules = list(TransformRule.objects.order_by("position", "id"))
    by_provider: dict[int, list[TransformRule]] = {}
    by_key: dict[int, list[TransformRule]] = {}
    global_rules = []
    for rule in rules:
        if rule.scope == "provider":
            by_provider.setdefault(rule.provider_id, []).append(rule)
        elif rule.scope == "api_key":
            by_key.setdefault(rule.api_key_id, []).append(rule)
        else:
            global_rules.append(rule)

    provider_scalars = [k for k in PROVIDER_FIELDS if k not in ("name", "channels", "transforms",
                                                                "strip_cross_protocol_nested")]
    providers = []
    for p in Provider.objects.prefetch_related("channels__models").order_by("priority", "name"):
        item: dict[str, Any] = {"name": p.name, "priority": p.priority}
        item.update(_nondefault(p, [k for k in provider_scalars if k != "priority"]))
        if p.strip_cross_protocol_nested != "inherit":
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
                models.append(mitem)
            citem["models"] = models
            channels.append(citem)
        item["channels"] = channels
        item["transforms"] = _rules_out(by_provider.get(p.pk, []))
        providers.append(item)

    keys = []
    for k in ApiKey.objects.select_related("owner").order_by("name", "id"):
        kitem: dict[str, Any] = {"name": k.name}
        if include_secrets:
            kitem["key_hash"] = k.key_hash
            kitem["key_prefix"] = k.prefix
        if not k.enabled:
            kitem["enabled"] = False
        if k.expires_at is not None:
            kitem["expires_at"] = k.expires_at.isoformat()
        kitem["capture"] = k.capture_mode
        if k.allowed_models is not None:
            kitem["allowed_models"] = k.allowed_models
        if k.model_redirects:
            kitem["model_redirects"] = k.model_redirects
        if k.owner is not None:
            kitem["owner"] = k.owner.get_username()
        kitem["transforms"] = _rules_out(by_key.get(k.pk, []))
        keys.append(kitem)

    settings_obj = GlobalSettings.objects.filter(pk=1).first() or GlobalSettings()
    return {
        "providers": providers,
        "global_transforms": _rules_out(global_rules),
        "api_keys": keys,
        "settings": {name: getattr(settings_obj, name) for name in _settings_fields()},
    }
