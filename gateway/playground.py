"""The playground and capture replay, project side: the database's configuration plus unsaved
rule edits, handed to the core's dry-run engine (``gateway.proxy.dryrun``), with per-rule JSON
diffs added (``captures.diff``).

Used by ``POST /api/playground/``, the admin's Playground page and the capture viewer's replay.
Off the hot path: it builds a fresh snapshot from the ORM on every call (a handful of queries).
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

from captures import diff as jdiff
from gateway.live_config import build_snapshot, compile_rule
from gateway.protocols import CLIENT_PROTOCOLS
from gateway.proxy import dryrun
from gateway.proxy.chain import CompiledRule
from gateway.proxy.snapshot import KeySnap, Snapshot, build_routes

RULE_FIELDS = (
    "transform",
    "config",
    "models",
    "phase",
    "scope",
    "position",
    "enabled",
    "provider",
    "api_key",
)


class PlaygroundError(Exception):
    """A bad playground request: answered as 400 with ``errors`` (field -> messages)."""

    def __init__(self, errors: dict[str, Any]) -> None:
        super().__init__(str(errors))
        self.errors = errors


# -- rules with unsaved edits --------------------------------------------------------------------


def _copy_rule(base: Any) -> Any:
    """An unsaved copy of a stored rule, so an override edits the copy and never the stored row."""
    from transforms.models import TransformRule

    return TransformRule(
        pk=base.pk,
        scope=base.scope,
        provider_id=base.provider_id,
        api_key_id=base.api_key_id,
        position=base.position,
        transform=base.transform,
        enabled=base.enabled,
        phase=base.phase,
        models=base.models,
        config=base.config,
    )


def _set_fields(rule: Any, item: dict) -> None:
    """Apply the fields an override gives (provider/api_key by id, the transform by canonical id)."""
    from transforms.registry import registry

    for name in RULE_FIELDS:
        if name in item:
            value = item[name]
            if name in ("provider", "api_key"):
                setattr(rule, f"{name}_id", value)
            elif name == "transform":
                rule.transform = registry.canonical_id(str(value))
            else:
                setattr(rule, name, value)


def _rule_errors(rule: Any) -> dict[str, list[str]]:
    """The admin's validation of one edited or new rule, plus the scope's required target."""
    from transforms.validation import validate_rule

    rule_errors = validate_rule(
        transform=rule.transform,
        scope=rule.scope,
        phase=rule.phase,
        models=rule.models,
        config=rule.config,
    )
    if rule.scope == "provider" and not rule.provider_id:
        rule_errors.setdefault("provider", []).append("a provider rule names its provider")
    if rule.scope == "api_key" and not rule.api_key_id:
        rule_errors.setdefault("api_key", []).append("an API-key rule names its key")
    return rule_errors


def _apply_overrides(overrides: Any) -> list[Any]:
    """Every stored rule, with the overrides applied: an override naming an ``id`` edits that
    rule (only the fields it gives), one without adds a new rule. Unsaved TransformRule objects;
    nothing is written. Each edited or new rule is validated like the admin would."""
    from transforms.models import TransformRule

    rules = {
        r.pk: r
        for r in TransformRule.objects.select_related("provider", "api_key").order_by("position", "id")
    }
    edited: set[int] = set()
    added = []
    if overrides in (None, ""):
        overrides = []
    if not isinstance(overrides, list):
        raise PlaygroundError({"rules": ["must be a list of rule objects"]})
    errors: dict[str, Any] = {}
    for n, item in enumerate(overrides):
        if not isinstance(item, dict):
            errors[str(n)] = {"rule": ["must be an object"]}
            continue
        rid = item.get("id")
        if rid is not None:
            base = rules.get(rid)
            if base is None:
                errors[str(n)] = {"id": [f"no rule with id {rid!r}"]}
                continue
            rule = _copy_rule(base)
        else:
            rule = TransformRule(
                scope=item.get("scope") or "global", phase="request", config={}, position=10**6
            )
        _set_fields(rule, item)
        rule_errors = _rule_errors(rule)
        if rule_errors:
            errors[str(n)] = rule_errors
            continue
        rule._playground_edited = True
        if rid is not None:
            rules[rid] = rule
            edited.add(rid)
        else:
            added.append(rule)
    if errors:
        raise PlaygroundError({"rules": errors})
    ordered = sorted(list(rules.values()) + added, key=lambda r: (r.position or 0, r.pk or 10**12))
    return ordered


def _owner_names() -> tuple[dict[int, str], dict[int, str]]:
    from keys.models import ApiKey
    from providers.models import Provider

    return (dict(Provider.objects.values_list("id", "name")), dict(ApiKey.objects.values_list("id", "name")))


def _rule_infos(
    rules: list[Any],
) -> tuple[list[dryrun.RuleInfo], dict[tuple[str, int | None], list[CompiledRule]]]:
    """The match explanation's view of every rule, and the compiled chains by (scope, owner)."""
    from transforms.registry import registry

    providers, keys = _owner_names()
    infos: list[dryrun.RuleInfo] = []
    chains: dict[tuple[str, int | None], list[CompiledRule]] = {}
    for rule in rules:
        owner = (
            rule.provider_id
            if rule.scope == "provider"
            else rule.api_key_id
            if rule.scope == "api_key"
            else None
        )
        owner_name = ""
        if owner is not None:
            owner_name = providers.get(owner, "") if rule.scope == "provider" else keys.get(owner, "")
        compiled = compile_rule(rule)
        problem = None
        cls = registry.get(rule.transform)
        if cls is None:
            problem = f"unknown transform {rule.transform!r}"
        elif rule.enabled and compiled is None:
            problem = f"{rule.transform} is not allowed in the {rule.scope} scope"
        if compiled is not None:
            chains.setdefault((rule.scope, owner), []).append(compiled)
        infos.append(
            dryrun.RuleInfo(
                rule_id=rule.pk,
                scope=rule.scope,
                owner=owner,
                owner_name=owner_name,
                transform=rule.transform,
                phase=rule.phase,
                models=tuple(rule.models) if rule.models is not None else None,
                enabled=rule.enabled,
                position=rule.position or 0,
                problem=problem,
                edited=getattr(rule, "_playground_edited", False),
            )
        )
    return infos, chains


def snapshot_with(rules: list[Any]) -> tuple[Snapshot, list[dryrun.RuleInfo]]:
    """The live configuration with these rules' chains in place of the stored ones."""
    snap = build_snapshot()
    infos, chains = _rule_infos(rules)
    providers = tuple(replace(p, chain=tuple(chains.get(("provider", p.id), ()))) for p in snap.providers)
    keys = {
        h: replace(k, chain=tuple(chains.get(("api_key", k.id), ()))) for h, k in snap.keys_by_hash.items()
    }
    snap = replace(
        snap,
        providers=providers,
        keys_by_hash=keys,
        global_chain=tuple(chains.get(("global", None), ())),
        routes=build_routes(list(providers)),
    )
    return snap, infos


def _key(snap: Snapshot, key_id: Any) -> KeySnap | None:
    if key_id in (None, "", 0):
        return None
    for k in snap.keys_by_hash.values():
        if str(k.id) == str(key_id):
            return k
    raise PlaygroundError({"api_key": [f"no API key with id {key_id!r}"]})


# -- diffs ---------------------------------------------------------------------------------------


def changes(before: Any, after: Any) -> list[dict[str, Any]]:
    return [
        {"op": c.op, "path": c.path if c.op != "added" else c.new_path, "old": c.old, "new": c.new}
        for c in jdiff.diff(before, after)
    ]


def _with_diffs(rows: list[dict[str, Any]], keep_states: bool) -> list[dict[str, Any]]:
    for row in rows:
        row["changes"] = changes(row["before"], row["after"]) if row["changed"] else []
        if not keep_states:
            row.pop("before", None)
            row.pop("after", None)
    return rows


# -- entry points --------------------------------------------------------------------------------


def _bool_or_none(value: Any) -> bool | None:
    if value in (None, ""):
        return None
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        return value.lower() in ("1", "true", "yes", "on")
    return bool(value)


def _int_or_none(value: Any, field: str) -> int | None:
    if value in (None, ""):
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        raise PlaygroundError({field: ["must be an integer"]}) from None


def run(payload: dict[str, Any], *, allow_send: bool = False) -> dict[str, Any]:
    """One playground run. ``payload``: ``protocol``, ``body``, optional ``api_key`` (id),
    ``stream`` (overrides the body), ``rules`` (unsaved edits), ``channel_id``, ``send`` (make
    the real upstream call; only when ``allow_send``), ``states`` (keep per-rule before/after)."""
    if not isinstance(payload, dict):
        raise PlaygroundError({"non_field_errors": ["expected a JSON object"]})
    protocol = payload.get("protocol") or "chat_completion"
    if protocol not in CLIENT_PROTOCOLS:
        raise PlaygroundError({"protocol": [f"one of {', '.join(CLIENT_PROTOCOLS)}"]})
    body = payload.get("body")
    if isinstance(body, str):
        import orjson

        try:
            body = orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            raise PlaygroundError({"body": [f"not valid JSON: {exc}"]}) from None
    if "model" in payload and isinstance(body, dict) and payload["model"]:
        body = {**body, "model": payload["model"]}
    rules = _apply_overrides(payload.get("rules"))
    snap, infos = snapshot_with(rules)
    key = _key(snap, payload.get("api_key"))
    channel_id = payload.get("channel_id")
    plan = dryrun.dry_run(
        snap,
        key,
        protocol,
        body,
        stream=_bool_or_none(payload.get("stream")),
        rules=infos,
        channel_id=_int_or_none(channel_id, "channel_id"),
    )
    keep = bool(payload.get("states", True))
    report = plan.report
    _with_diffs(report["request_chain"], keep)
    if report.get("urp_before") is not None:
        report["urp_changes"] = changes(report["urp_before"], report["urp_after"])
    if payload.get("send"):
        if not allow_send:
            raise PlaygroundError({"send": ["sending for real needs a staff user"]})
        sent = asyncio.run(dryrun.send(plan))
        _with_diffs(sent.get("response_chain") or [], keep)
        report["sent"] = sent
    return report


def replay(dump: dict[str, Any], *, send: bool = False, api_key_id: int | None = None) -> dict[str, Any]:
    """Re-run a captured client request with the current configuration and compare the
    upstream request it would send now with the one the capture recorded."""
    body = dump.get("client_request")
    payload = {
        "protocol": dump.get("client_protocol") or "chat_completion",
        "body": body,
        "api_key": api_key_id,
        "send": send,
        "states": False,
    }
    report = run(payload, allow_send=send)
    attempts = dump.get("attempts") or []
    original = attempts[-1].get("upstream_request") if attempts else None
    new = (report.get("upstream") or {}).get("body")
    report["replay"] = {
        "original_upstream_request": original,
        "new_upstream_request": new,
        "original_route": (
            {
                "provider": attempts[-1].get("provider"),
                "channel": attempts[-1].get("channel"),
                "upstream_model": attempts[-1].get("upstream_model"),
            }
            if attempts
            else None
        ),
        "changes": changes(original, new) if original is not None and new is not None else None,
        "same": original == new,
    }
    return report


def rule_admin_url(scope: str | None, rule_id: int | None, owner_id: int | None) -> str | None:
    """Where a rule is edited: the global chain's own page, else its provider's or key's page
    (provider and key rules are inlines there)."""
    from django.urls import NoReverseMatch, reverse

    try:
        if scope == "global" and rule_id:
            return reverse("admin:transforms_globaltransformrule_change", args=[rule_id])
        if scope == "provider" and owner_id:
            return reverse("admin:providers_provider_change", args=[owner_id])
        if scope == "api_key" and owner_id:
            return reverse("admin:keys_apikey_change", args=[owner_id])
    except NoReverseMatch:
        return None
    return None
