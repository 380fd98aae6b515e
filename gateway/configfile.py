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
      - {name: demo, key: sk-demo-0001, capture_mode: all, allowed_models: ["*"], transforms: []}
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
  the exact path of the bad field (``providers[0].channels[1].protocol: ...``), all at once.
  The document's shape (``gateway.configschema``, published as a JSON Schema) is checked first;
  then every object is written through the same services as the REST API (``providers.services``,
  ``keys.services``, ``transforms.services``, ``gateway.services``), which run ``full_clean()``.
  The config version is bumped once, on commit.
- Field names are the models' and the REST API's (``capture_mode``; ``capture`` is still read).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import orjson
import yaml
from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Model, QuerySet

from gateway.configdump import dump  # re-exported: the file format's other half
from gateway.configenv import substitute
from gateway.configschema import API_KEY, PROVIDER, check_structure
from gateway.models import GlobalSettings
from gateway.services import write_settings
from gateway.writes import ErrorTree, by_index, flatten
from keys.models import ApiKey
from keys.services import write_api_key
from providers.models import Provider
from providers.services import write_provider
from transforms.models import Scope
from transforms.services import replace_chain


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
    keyless_channels: list[str] = field(default_factory=list)  # created without an upstream key

    def note(self, kind: str, what: str, name: str) -> None:
        if what == "keyless":
            self.keyless_channels.append(name)
            return
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


MAX_YAML_NODES = 100_000  # nodes of a YAML document with every alias expanded


def _yaml_load(text: str) -> Any:
    """``yaml.safe_load`` that refuses a document whose aliases expand beyond
    ``MAX_YAML_NODES`` nodes (issue 13: a 1.6 KB alias bomb ran the process out of memory).
    The expanded size is counted on the composed node graph, each distinct node once."""
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        sizes: dict[int, int] = {}

        def size(n: yaml.Node) -> int:
            known = sizes.get(id(n))
            if known is not None:
                return known
            sizes[id(n)] = MAX_YAML_NODES + 1  # a cycle counts as too big
            total = 1
            if isinstance(n, yaml.SequenceNode):
                for child in n.value:
                    total += size(child)
                    if total > MAX_YAML_NODES:
                        break
            elif isinstance(n, yaml.MappingNode):
                for k, v in n.value:
                    total += size(k) + size(v)
                    if total > MAX_YAML_NODES:
                        break
            sizes[id(n)] = total
            return total

        if size(node) > MAX_YAML_NODES:
            raise ConfigError(
                [f"(file): YAML aliases expand to more than {MAX_YAML_NODES} nodes; refusing it"]
            )
        return loader.construct_document(node)
    finally:
        loader.dispose()


def parse_text(text: str, *, json_format: bool = False) -> Any:
    try:
        return orjson.loads(text) if json_format else _yaml_load(text)
    except (orjson.JSONDecodeError, yaml.YAMLError) as exc:
        raise ConfigError([f"(file): not valid {'JSON' if json_format else 'YAML'}: {exc}"]) from exc
    except RecursionError:
        raise ConfigError(["(file): nested too deeply"]) from None


def read_file(path: str | Path) -> Any:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError([f"(file): cannot read {path}: {exc.strerror or exc}"]) from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(
            [f"(file): {path} is not valid UTF-8 (byte {exc.start}): save it as UTF-8"]
        ) from None
    text, errors = substitute(text)
    if errors:
        raise ConfigError(errors)
    return parse_text(text, json_format=path.suffix.lower() == ".json")


def render(data: dict[str, Any], fmt: str = "yaml") -> str:
    if fmt == "json":
        return orjson.dumps(data, option=orjson.OPT_INDENT_2).decode() + "\n"
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, default_flow_style=False)


# ---------------------------------------------------------------------------------------------
# Applying: file conventions in, the write services do the rest.


def _aware(value: str | dt.datetime) -> dt.datetime:
    """An expiry without a time zone is read as UTC (the gateway's time zone)."""
    when = dt.datetime.fromisoformat(value) if isinstance(value, str) else value
    return when if when.tzinfo is not None else when.replace(tzinfo=dt.UTC)


def _decimal_in(value: Any) -> Decimal:
    # A YAML float goes through its shortest repr, never its binary expansion.
    return Decimal(str(value)) if isinstance(value, float) else Decimal(value)


def _channels_in(channels: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for channel in channels:
        channel = {**channel, "name": channel["name"].strip()}
        if "models" in channel:
            channel["models"] = [
                {
                    **m,
                    "model": m["model"].strip(),
                    **({"multiplier": _decimal_in(m["multiplier"])} if "multiplier" in m else {}),
                }
                for m in channel["models"]
            ]
        out.append(channel)
    return out


class _Applier:
    def __init__(self, prune: bool) -> None:
        self.prune = prune
        self.errors: list[str] = []
        self.report = LoadReport()

    def fail(self, tree: ErrorTree, path: str, rename: dict[str, str] | None = None) -> bool:
        """Record ``tree`` under ``path``; True when there was anything to record."""
        self.errors.extend(flatten(tree, path, rename=lambda k: (rename or {}).get(k, k)))
        return bool(tree)

    def chain(self, entries: list[dict[str, Any]], path: str, **owner: Any) -> None:
        self.fail(by_index(replace_chain(entries, **owner)), path)

    def prune_missing(self, stored: QuerySet, entries: list[dict[str, Any]], kind: str) -> None:
        """With ``prune``, delete the stored objects no entry of the file names."""
        if self.prune:
            names = {e["name"].strip() for e in entries}
            obj: Model
            for obj in stored.exclude(name__in=names):
                self.report.note(kind, "deleted", obj.name)
                obj.delete()

    def providers(self, entries: list[dict[str, Any]]) -> None:
        scalars = [k for k in PROVIDER if k not in ("channels", "transforms")]
        for i, entry in enumerate(entries):
            path = f"providers[{i}]"
            name = entry["name"].strip()
            obj = Provider.objects.filter(name=name).first() or Provider()
            data = {k: entry[k] for k in scalars if k in entry} | {"name": name}
            if isinstance(data.get("multiplier"), float):
                data["multiplier"] = _decimal_in(data["multiplier"])
            channels = _channels_in(entry["channels"]) if "channels" in entry else None
            errors = write_provider(
                obj, data, channels=channels, reset_missing=True, prune=self.prune, note=self.report.note
            )
            self.fail(errors, path)
            if set(errors) - {"channels"} or obj.pk is None:
                continue
            if "transforms" in entry:
                self.chain(entry["transforms"], f"{path}.transforms", scope=Scope.PROVIDER, provider=obj)
        self.prune_missing(Provider.objects.all(), entries, "providers")

    def api_keys(self, entries: list[dict[str, Any]]) -> None:
        users = get_user_model()
        fields = [k for k in API_KEY if k not in ("capture", "key", "key_hash", "key_prefix", "transforms")]
        for i, entry in enumerate(entries):
            path = f"api_keys[{i}]"
            name = entry["name"].strip()
            data = {k: entry[k] for k in fields if k in entry} | {"name": name}
            rename = {}
            if "capture" in entry:
                data["capture_mode"] = entry["capture"]
                rename["capture_mode"] = "capture"
            if data.get("expires_at") is not None:
                data["expires_at"] = _aware(data["expires_at"])
            found = list(ApiKey.objects.filter(name=name)[:2])
            if len(found) > 1:
                self.errors.append(
                    f"{path}.name: several stored API keys are named {name!r}; rename them first"
                )
                continue
            owner = entry.get("owner")
            data["owner"] = users.objects.filter(**{users.USERNAME_FIELD: owner}).first() if owner else None
            if owner and data["owner"] is None:
                self.errors.append(f"{path}.owner: no user named {owner!r}")
                continue
            obj = found[0] if found else ApiKey()
            errors, generated = write_api_key(
                obj,
                data,
                secret=entry.get("key"),
                key_hash=entry.get("key_hash"),
                key_prefix=entry.get("key_prefix"),
                reset_missing=True,
                note=self.report.note,
            )
            if self.fail(errors, path, rename):
                continue
            if generated:
                self.report.generated_secrets[name] = generated
            if "transforms" in entry:
                self.chain(entry["transforms"], f"{path}.transforms", scope=Scope.API_KEY, api_key=obj)
        self.prune_missing(ApiKey.objects.all(), entries, "api_keys")


def load(data: Any, *, prune: bool = False) -> LoadReport:
    """Apply a parsed configuration document in one transaction; raise ConfigError (and write
    nothing) when anything in it is wrong, with every problem found."""
    errors = check_structure(data)
    if errors:
        raise ConfigError(errors)
    data = data or {}
    applier = _Applier(prune)
    with transaction.atomic():
        if data.get("providers") is not None:
            applier.providers(data["providers"])
        if data.get("global_transforms") is not None:
            applier.chain(data["global_transforms"], "global_transforms", scope=Scope.GLOBAL)
        if data.get("api_keys") is not None:
            applier.api_keys(data["api_keys"])
        if data.get("settings") is not None:
            applier.fail(
                write_settings(
                    GlobalSettings.load(), data["settings"], reset_missing=True, note=applier.report.note
                ),
                "settings",
            )
        if applier.errors:
            # Leaving the block with an exception rolls everything back, bump included.
            raise ConfigError(applier.errors)
    return applier.report


def load_file(path: str | Path, *, prune: bool = False) -> LoadReport:
    return load(read_file(path), prune=prune)


__all__ = ["ConfigError", "LoadReport", "dump", "load", "load_file", "parse_text", "read_file", "render"]
