"""The shape of a configuration file, derived from the models, as a spec and as a JSON Schema.

Each object of the file (provider, channel, channel model, transform rule, API key, settings) is
the model's writable fields (``gateway.writes.editable_fields``, the same list the REST
serializers and the write services use) plus the few keys only the file has (nested lists,
secrets, the owner's user name). A field with a default is optional; ``null`` is accepted where
the model allows null or blank. So adding a model field reaches the file, its schema and its
checks with nothing else to edit (a JSON field may add its shape to ``JSON_SHAPES``).

:func:`check_structure` enforces types, nullability, required and unknown keys and duplicate
names, and reports every problem at once, by exact path, before anything is written. Value rules
(choices, ranges, URLs, header names, transform configs) are the models' and are reported by the
write services with the models' own messages. :func:`json_schema` publishes the same shape for
editors (``manage.py configschema``; ``config/schema.json``), with choices as ``enum``.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from django.core.validators import MinValueValidator
from django.db import models as dj_models

from gateway.models import GlobalSettings
from gateway.services import SETTINGS_FIELDS
from keys.models import ApiKey
from keys.services import API_KEY_FIELDS, MIN_SECRET_LEN
from providers.models import Channel, ChannelModel, Provider, TriState
from providers.services import CHANNEL_FIELDS, CHANNEL_MODEL_FIELDS, PROVIDER_FIELDS
from transforms.models import TransformRule
from transforms.services import RULE_FIELDS

STR, BOOL, INT, NUM, LIST, DICT, DECIMAL, DATETIME, TRISTATE, ANY = (
    "a string",
    "true or false",
    "an integer",
    "a number",
    "a list",
    "a mapping",
    "a decimal number",
    "an ISO 8601 date-time",
    "true, false, null or inherit",
    "any value",
)
_HEX64 = re.compile(r"^[0-9a-f]{64}$")
_NO_DEFAULT = object()

# One rule shape for per-key and global model redirects (gateway.redirects validates it).
_REDIRECT_RULES: dict[str, Any] = {
    "maxItems": 32,
    "items": {
        "type": "object",
        "required": ["pattern", "replace"],
        "additionalProperties": False,
        "properties": {
            "pattern": {"type": "string", "minLength": 1},
            "replace": {"type": "string", "minLength": 1},
        },
    },
}

# The shape of JSON fields, which the model cannot tell: (kind, JSON Schema of the items/values).
JSON_SHAPES: dict[str, tuple[str, dict[str, Any]]] = {
    "providers.Provider.extra_fields_whitelist": (LIST, {"items": {"type": "string"}}),
    "providers.Channel.extra_headers": (DICT, {"additionalProperties": {"type": "string"}}),
    "keys.ApiKey.allowed_models": (LIST, {"items": {"type": "string"}}),
    "keys.ApiKey.model_redirects": (LIST, _REDIRECT_RULES),
    "gateway.GlobalSettings.model_redirects": (LIST, _REDIRECT_RULES),
    "gateway.GlobalSettings.codex_model_ids": (
        LIST,
        {"maxItems": 256, "uniqueItems": True, "items": {"type": "string", "minLength": 1, "maxLength": 256}},
    ),
    "transforms.TransformRule.models": (LIST, {"items": {"type": "string"}}),
    "providers.ChannelModel.price": (
        DICT,
        {
            "additionalProperties": False,
            "properties": {
                name: {"type": ["string", "number"], "pattern": r"^\d{1,9}(\.\d{1,12})?$"}
                for name in ("input", "output", "cache_read", "cache_write", "reasoning")
            },
        },
    ),
    "transforms.TransformRule.config": (DICT, {}),
}


@dataclass(frozen=True)
class Prop:
    """One key of a file object: its kind (one of the constants above, also the error wording)."""

    kind: str
    nullable: bool = False
    required: bool = False
    description: str = ""
    default: Any = _NO_DEFAULT
    enum: tuple[Any, ...] = ()
    extra: tuple[tuple[str, Any], ...] = ()  # further JSON Schema keywords, for editors only
    alias_of: str = ""


def _kind(model: type[dj_models.Model], field: dj_models.Field) -> tuple[str, dict[str, Any]]:
    if field.choices and list(field.choices) == list(TriState.choices):
        return TRISTATE, {}
    if isinstance(field, dj_models.BooleanField):
        return BOOL, {}
    if isinstance(field, dj_models.IntegerField):
        return INT, {}
    if isinstance(field, dj_models.FloatField):
        return NUM, {}
    if isinstance(field, dj_models.DecimalField):
        return DECIMAL, {}
    if isinstance(field, dj_models.DateTimeField):
        return DATETIME, {}
    if isinstance(field, dj_models.JSONField):
        return JSON_SHAPES.get(f"{model._meta.label}.{field.name}", (ANY, {}))
    return STR, {}  # text, and foreign keys named by their natural key (a user name)


def _json_default(value: Any) -> Any:
    if isinstance(value, Decimal):
        return format(value.normalize(), "f")
    return value.value if isinstance(value, dj_models.Choices) else value


def model_props(model: type[dj_models.Model], names: tuple[str, ...]) -> dict[str, Prop]:
    """The file keys of a model's writable fields."""
    props: dict[str, Prop] = {}
    for name in names:
        field = model._meta.get_field(name)
        kind, extra = _kind(model, field)
        nullable = kind == TRISTATE or field.null or (field.blank and kind != BOOL)
        # Declared bounds only (not the database's integer range, which depends on the backend).
        minimum = [v.limit_value for v in field._validators if isinstance(v, MinValueValidator)]
        if isinstance(field, dj_models.PositiveIntegerField | dj_models.PositiveBigIntegerField):
            minimum.append(0)
        if minimum:
            low = max(minimum)
            extra = {**extra, "minimum": float(low) if isinstance(low, Decimal) else low}
        props[name] = Prop(
            kind=kind,
            nullable=nullable,
            required=not field.has_default() and not nullable,
            description=str(field.help_text or ""),
            default=_json_default(field.get_default())
            if field.has_default() and kind != TRISTATE
            else _NO_DEFAULT,
            enum=tuple(v for v, _ in field.choices) if field.choices and kind != TRISTATE else (),
            extra=tuple(extra.items()),
        )
    return props


_SECRET = "Write-only secret: kept when left out."
RULE = model_props(TransformRule, RULE_FIELDS)
CHANNEL_MODEL = model_props(ChannelModel, CHANNEL_MODEL_FIELDS)
CHANNEL = {
    **model_props(Channel, CHANNEL_FIELDS),
    "api_key": Prop(STR, nullable=True, description=_SECRET + " Required for a new channel."),
    "models": Prop(LIST, description="The models this channel serves; a bare string is {model: ...}."),
}
PROVIDER = {
    **model_props(Provider, PROVIDER_FIELDS),
    "channels": Prop(LIST, description="Matched by name."),
    "transforms": Prop(LIST, description="The provider chain; replaces the stored chain when present."),
}
API_KEY = {
    **model_props(ApiKey, API_KEY_FIELDS),
    "capture": Prop(STR, description="Older spelling of capture_mode.", alias_of="capture_mode"),
    "key": Prop(
        STR, nullable=True, description=_SECRET + f" At least {MIN_SECRET_LEN} characters, no spaces."
    ),
    "key_hash": Prop(
        STR, nullable=True, description="The stored hash, as written by dumpconfig --include-secrets."
    ),
    "key_prefix": Prop(STR, nullable=True, description="The display prefix that goes with key_hash."),
    "transforms": Prop(LIST, description="The API key chain; replaces the stored chain when present."),
}
API_KEY["owner"] = Prop(STR, nullable=True, description="User name of the owner.")
SETTINGS = model_props(GlobalSettings, SETTINGS_FIELDS)
TOP = {
    "providers": Prop(LIST, nullable=True),
    "global_transforms": Prop(LIST, nullable=True),
    "api_keys": Prop(LIST, nullable=True),
    "settings": Prop(DICT, nullable=True),
}


# ---------------------------------------------------------------------------------------------
# Checking


def _type_ok(kind: str, value: Any) -> bool:
    simple = {STR: str, BOOL: bool, LIST: list, DICT: dict}
    if kind in simple:
        return isinstance(value, simple[kind])
    if isinstance(value, bool):
        return kind in (TRISTATE, ANY)
    if kind == INT:
        return isinstance(value, int)
    if kind == NUM:
        return isinstance(value, int | float)
    if kind == DECIMAL:
        if isinstance(value, int | float):
            return True
        try:
            return isinstance(value, str) and Decimal(value).is_finite()
        except InvalidOperation:
            return False
    if kind == DATETIME:
        if isinstance(value, str):
            try:
                dt.datetime.fromisoformat(value)
            except ValueError:
                return False
            return True
        return isinstance(value, dt.datetime)
    if kind == TRISTATE:
        return value in ("inherit", "true", "false")
    return True


class _Collector:
    def __init__(self) -> None:
        self.errors: list[str] = []

    def add(self, path: str, message: str) -> None:
        self.errors.append(f"{path}: {message}")


def _check_object(value: Any, path: str, spec: dict[str, Prop], errs: _Collector) -> bool:
    if not isinstance(value, dict):
        errs.add(path, "must be a mapping")
        return False
    ok = True
    for key in value:
        if key not in spec:
            errs.add(f"{path}.{key}", f"unknown field (expected one of: {', '.join(spec)})")
            ok = False
    for key, prop in spec.items():
        if key not in value:
            if prop.required:
                errs.add(f"{path}.{key}", "required")
                ok = False
            continue
        v = value[key]
        if prop.alias_of and prop.alias_of in value:
            errs.add(f"{path}.{key}", f"give either {prop.alias_of} or {key}, not both")
            ok = False
        elif v is None:
            if not prop.nullable:
                errs.add(f"{path}.{key}", f"must be {prop.kind}, not null")
                ok = False
        elif not _type_ok(prop.kind, v):
            errs.add(f"{path}.{key}", f"must be {prop.kind}")
            ok = False
        elif prop.kind == STR and prop.required and not v.strip():
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


def _check_rules(rules: list[Any], path: str, errs: _Collector) -> None:
    for j, rule in enumerate(rules):
        _check_object(rule, f"{path}[{j}]", RULE, errs)


def _check_provider(p: Any, ppath: str, errs: _Collector) -> None:
    if not _check_object(p, ppath, PROVIDER, errs):
        return
    channels = p.get("channels") or []
    for k, c in enumerate(channels):
        cpath = f"{ppath}.channels[{k}]"
        if isinstance(c, dict) and isinstance(c.get("models"), list):
            # ``models: [gpt-4o]`` is short for ``models: [{model: gpt-4o}]``.
            c["models"] = [{"model": m} if isinstance(m, str) else m for m in c["models"]]
        if not _check_object(c, cpath, CHANNEL, errs):
            continue
        for m_i, m in enumerate(c.get("models") or []):
            _check_object(m, f"{cpath}.models[{m_i}]", CHANNEL_MODEL, errs)
        _check_unique(c.get("models") or [], "model", f"{cpath}.models", errs)
    _check_unique(channels, "name", f"{ppath}.channels", errs)
    _check_rules(p.get("transforms") or [], f"{ppath}.transforms", errs)


def _check_api_key(k: Any, kpath: str, errs: _Collector) -> None:
    if not _check_object(k, kpath, API_KEY, errs):
        return
    secret = k.get("key")
    if isinstance(secret, str) and (
        len(secret) < MIN_SECRET_LEN or secret != secret.strip() or " " in secret
    ):
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


def check_structure(data: Any) -> list[str]:
    """Shape errors (``"path: message"``), all of them; empty when the write may run. Expands the
    ``models: [name]`` shorthand in place."""
    errs = _Collector()
    if data is None:
        data = {}
    if not _check_object(data, "(top level)", TOP, errs):
        return [e.replace("(top level).", "", 1) for e in errs.errors]
    providers = data.get("providers") or []
    for i, p in enumerate(providers):
        _check_provider(p, f"providers[{i}]", errs)
    _check_unique(providers, "name", "providers", errs)
    _check_rules(data.get("global_transforms") or [], "global_transforms", errs)
    keys = data.get("api_keys") or []
    for i, k in enumerate(keys):
        _check_api_key(k, f"api_keys[{i}]", errs)
    _check_unique(keys, "name", "api_keys", errs)
    if isinstance(data.get("settings"), dict):
        _check_object(data["settings"], "settings", SETTINGS, errs)
    return [e.replace("(top level).", "", 1) for e in errs.errors]


# ---------------------------------------------------------------------------------------------
# Publishing

_JSON_TYPES = {
    STR: "string",
    BOOL: "boolean",
    INT: "integer",
    NUM: "number",
    LIST: "array",
    DICT: "object",
    DATETIME: "string",
    DECIMAL: ["string", "number"],
}


def _prop_schema(prop: Prop, items: dict[str, Any] | None = None) -> dict[str, Any]:
    if prop.kind == TRISTATE:
        out: dict[str, Any] = {"enum": [True, False, None, "inherit", "true", "false"]}
    elif prop.kind == ANY:
        out = {}
    else:
        kind = _JSON_TYPES[prop.kind]
        kinds = kind if isinstance(kind, list) else [kind]
        out = {"type": [*kinds, "null"] if prop.nullable else (kinds[0] if len(kinds) == 1 else kinds)}
        if prop.kind == DATETIME:
            out["format"] = "date-time"
    if prop.enum:
        out["enum"] = [*prop.enum, None] if prop.nullable else list(prop.enum)
    out.update(dict(prop.extra))
    if items is not None:
        out["items"] = items
    if prop.description:
        out["description"] = prop.description
    if prop.default is not _NO_DEFAULT:
        out["default"] = prop.default
    if prop.alias_of:
        out["deprecated"] = True
    return out


def _object_schema(spec: dict[str, Prop], items: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    items = items or {}
    schema: dict[str, Any] = {
        "type": "object",
        "additionalProperties": False,
        "properties": {name: _prop_schema(prop, items.get(name)) for name, prop in spec.items()},
    }
    required = [name for name, prop in spec.items() if prop.required]
    if required:
        schema["required"] = required
    return schema


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/$defs/{name}"}


def json_schema() -> dict[str, Any]:
    """The file's shape as a JSON Schema (draft 2020-12), for editors and validators."""
    rule = _ref("transform_rule")
    top = _object_schema(
        TOP, {"providers": _ref("provider"), "global_transforms": rule, "api_keys": _ref("api_key")}
    )
    top["properties"]["settings"] = {
        "anyOf": [_ref("settings"), {"type": "null"}],
        "description": "The whole settings row when present (omitted fields: defaults).",
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "Monogate configuration (manage.py loadconfig / dumpconfig)",
        "description": "Generated by `manage.py configschema` from the models; do not edit by hand.",
        **top,
        "$defs": {
            "provider": _object_schema(PROVIDER, {"channels": _ref("channel"), "transforms": rule}),
            "channel": _object_schema(
                CHANNEL, {"models": {"anyOf": [{"type": "string"}, _ref("channel_model")]}}
            ),
            "channel_model": _object_schema(CHANNEL_MODEL),
            "transform_rule": _object_schema(RULE),
            "api_key": _object_schema(API_KEY, {"transforms": rule}),
            "settings": _object_schema(SETTINGS),
        },
    }
