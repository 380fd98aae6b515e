"""Loading the proxy's configuration snapshot from the database: the ``ConfigSource`` the
project wires into the proxy (``gateway.wiring``). The core (``gateway.proxy``) never imports
the ORM or the apps; this module is the one place that turns models into snapshot objects.
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from typing import Any

from gateway.conf import gateway_settings
from gateway.errors import TransformInitFailed
from gateway.proxy.chain import CompiledRule
from gateway.proxy.effort_suffix import compile_suffixes
from gateway.proxy.limits import parse_limits, utc_day
from gateway.proxy.snapshot import (
    ChannelSnap,
    KeySnap,
    ModelPrice,
    ProviderSnap,
    SettingsSnap,
    Snapshot,
    build_routes,
)
from gateway.redirects import compile_redirects
from transforms.base import Transform, TransformContext

log = logging.getLogger("gateway.proxy.snapshot")


class BrokenTransform(Transform):
    """Stands in for a rule that could not be built; raises whenever it would run."""

    type_id = "broken"
    category = "field"
    name = {"en": "Broken rule", "zh": "损坏的规则"}
    description = {"en": "A rule that could not be initialised.", "zh": "无法初始化的规则。"}
    phases = ("request", "response")

    def __init__(self, type_id: str, reason: str) -> None:  # noqa: D107 - no config parsing on purpose
        self.type_id = type_id
        self.reason = reason
        self.config = {}

    def _fail(self):
        raise TransformInitFailed(f"transform {self.type_id!r} could not be initialised: {self.reason}")

    def apply_request(self, req, ctx: TransformContext) -> None:
        self._fail()

    def apply_response(self, resp, ctx: TransformContext) -> None:
        self._fail()

    def new_stream_state(self, ctx: TransformContext) -> Any:
        self._fail()

    def apply_event(self, event, state, ctx: TransformContext):
        self._fail()


# -- building ---------------------------------------------------------------------------------


def compile_rule(rule) -> CompiledRule | None:
    """A stored TransformRule as the engine runs it; None for a disabled rule or one that is not
    allowed in its scope (dropped at load time, like the reference)."""
    from transforms.registry import registry

    if not rule.enabled:
        return None
    type_id = registry.canonical_id(rule.transform)
    cls = registry.get(type_id)
    # null: every model; a list: one glob must match, so an empty list matches nothing (the
    # admin form turns an empty input into null).
    models = tuple(rule.models) if rule.models is not None else None
    if cls is None:
        transform: Transform = BrokenTransform(
            type_id, "transform not found (not built in and not installed as a plug-in)"
        )
    elif rule.scope not in cls.scopes:
        log.warning("dropping rule %s: %s is not allowed in the %s scope", rule.pk, type_id, rule.scope)
        return None
    else:
        try:
            transform = cls(rule.config or {})
        except Exception as exc:
            log.exception("rule %s (%s) failed to initialise", rule.pk, type_id)
            transform = BrokenTransform(type_id, f"{type(exc).__name__}")
    return CompiledRule(
        rule_id=rule.pk, scope=rule.scope, phase=rule.phase, models=models, transform=transform
    )


def channel_snap(ch, provider_multiplier: Any = 1) -> ChannelSnap:
    """One stored Channel (its models prefetched or not) as the proxy sees it, key decrypted;
    prices carry the channel model's and the provider's multipliers."""
    models = {m.model: (m.upstream_model or m.model) for m in ch.models.all()}
    prices = {
        m.model: price
        for m in ch.models.all()
        if (price := model_price(m.price, m.multiplier * provider_multiplier)) is not None
    }
    headers = tuple(sorted((str(k), str(v)) for k, v in (ch.extra_headers or {}).items()))
    return ChannelSnap(
        id=ch.id,
        name=ch.name,
        provider_id=ch.provider_id,
        protocol=ch.protocol,
        base_url=ch.base_url,
        api_key=ch.get_api_key(),
        weight=ch.weight,
        extra_headers=headers,
        models=models,
        prices=prices,
    )


def provider_snap(p, chain: tuple[CompiledRule, ...], channels: tuple[ChannelSnap, ...]) -> ProviderSnap:
    """One stored Provider as the proxy sees it, with the given chain and channels."""
    wl = p.extra_fields_whitelist
    return ProviderSnap(
        id=p.id,
        name=p.name,
        priority=p.priority,
        max_retries=p.max_retries,
        channel_max_retries=p.channel_max_retries,
        channel_retry_interval_ms=p.channel_retry_interval_ms,
        request_timeout=p.request_timeout_seconds,
        circuit_breaker_enabled=p.circuit_breaker_enabled,
        strip_nested=p.strip_nested_override,
        extra_fields_whitelist=tuple(wl) if isinstance(wl, list) else None,
        chain=chain,
        channels=channels,
        multiplier=p.multiplier,
        affinity_mode=p.affinity_mode,
        affinity_failback=float(p.affinity_failback_seconds),
        breaker_failures=p.breaker_failure_threshold,
        breaker_window=p.breaker_window_seconds,
        breaker_cooldown=p.breaker_cooldown_seconds,
    )


def settings_snap() -> SettingsSnap:
    """The global settings row (or its defaults) as the proxy sees it."""
    from gateway.models import GlobalSettings

    gs = GlobalSettings.current()
    return SettingsSnap(
        capture_enabled=gs.capture_enabled,
        strip_cross_protocol_nested=gs.strip_cross_protocol_nested,
        request_timeout=gs.request_timeout_seconds,
        connect_timeout=gs.connect_timeout_seconds,
        idle_timeout=min(gs.upstream_idle_timeout_seconds, float(gateway_settings.UPSTREAM_IDLE_TIMEOUT)),
        fetch_allow_private=gs.fetch_allow_private,
        guard_channel_urls=gs.guard_channel_urls,
        effort_suffixes=compile_suffixes(gs.reasoning_effort_suffixes),
        redirects=compile_redirects(gs.model_redirects),
        codex_model_ids=tuple(gs.codex_model_ids) if isinstance(gs.codex_model_ids, list) else (),
    )


def model_price(raw: Any, multiplier: Decimal) -> ModelPrice | None:
    """A stored ``ChannelModel.price`` (decimal strings) as the snapshot's ``ModelPrice``; None
    when the model has no input or output price (its requests are logged without a cost)."""
    if not isinstance(raw, dict):
        return None
    values: dict[str, Decimal | None] = {}
    for name in ("input", "output", "cache_read", "cache_write", "reasoning"):
        v = raw.get(name)
        try:
            values[name] = (
                Decimal(str(v))
                if v is not None and not isinstance(v, float)
                else (Decimal(repr(v)) if isinstance(v, float) else None)
            )
        except InvalidOperation:
            values[name] = None
    if values["input"] is None and values["output"] is None:
        return None
    return ModelPrice(multiplier=Decimal(multiplier), **values)


def _load_chains() -> dict[tuple[str, int | None], list[CompiledRule]]:
    """Every enabled rule compiled, by (scope, owner id), in execution order."""
    from transforms.models import TransformRule

    chains: dict[tuple[str, int | None], list[CompiledRule]] = {}
    for rule in TransformRule.objects.order_by("position", "id"):
        compiled = compile_rule(rule)
        if compiled is not None:
            owner = (
                rule.provider_id
                if rule.scope == "provider"
                else rule.api_key_id
                if rule.scope == "api_key"
                else None
            )
            chains.setdefault((rule.scope, owner), []).append(compiled)
    return chains


def build_snapshot(version: tuple[int, int] = (0, 0)) -> Snapshot:
    """Read the whole configuration (a handful of queries). Runs in the poller thread, or in a
    test; never on the event loop."""
    from keys.models import ApiKey
    from providers.models import Provider

    chains = _load_chains()
    settings = settings_snap()

    providers = []
    for p in (
        Provider.objects.filter(enabled=True).prefetch_related("channels__models").order_by("priority", "id")
    ):
        channels = []
        for ch in sorted(p.channels.all(), key=lambda c: c.id):
            if ch.enabled:
                channels.append(channel_snap(ch, p.multiplier))
        providers.append(provider_snap(p, tuple(chains.get(("provider", p.id), ())), tuple(channels)))

    keys = {}
    spent = _spend_so_far(ApiKey.objects.filter(limits__isnull=False))
    for k in ApiKey.objects.select_related("owner"):
        keys[k.key_hash] = KeySnap(
            id=k.id,
            name=k.name,
            enabled=k.enabled,
            expires_at=k.expires_at.timestamp() if k.expires_at else None,
            allowed_models=tuple(k.allowed_models) if k.allowed_models else None,
            redirects=compile_redirects(k.model_redirects),
            capture_mode=k.capture_mode or "off",
            chain=tuple(chains.get(("api_key", k.id), ())),
            limits=parse_limits(k.limits, k.ip_allow, **spent.get(k.id, {})),
            reasoning_envelopes=k.reasoning_envelopes,
            owner_username=k.owner.get_username() if k.owner_id else None,
        )

    return Snapshot(
        version=version[0],
        redis_version=version[1],
        built_at=time.time(),
        keys_by_hash=keys,
        providers=tuple(providers),
        global_chain=tuple(chains.get(("global", None), ())),
        settings=settings,
        routes=build_routes(providers),
    )


class DatabaseConfigSource:
    """The ``ConfigSource`` over the database: version from ``gateway.config_version``,
    snapshot from :func:`build_snapshot`, key use written to ``ApiKey.last_used_at``."""

    def version(self) -> tuple[int, int]:
        from gateway.config_version import current

        return current()

    def build(self, version: tuple[int, int]) -> Snapshot:
        return build_snapshot(version)

    def record_key_use(self, key_ids: list[int]) -> None:
        from django.utils import timezone

        from keys.models import ApiKey

        ApiKey.objects.filter(id__in=key_ids).update(last_used_at=timezone.now())

    def release(self) -> None:
        from django.db import connection

        connection.close()


def _spend_so_far(keys) -> dict[int, dict[str, Any]]:
    """For keys with a spend cap: what the request logs hold today (UTC) and in total, so the
    limiter's counters start from there (one aggregate query per snapshot build, never per
    request). Rows still queued for writing are not in it yet; the counters catch up as the
    limiter settles requests."""
    from django.db.models import Q, Sum

    from requestlogs.models import RequestLog

    capped = [
        k.id
        for k in keys
        if isinstance(k.limits, dict) and (k.limits.get("daily_spend") or k.limits.get("total_spend"))
    ]
    if not capped:
        return {}
    now = time.time()
    day = utc_day(now)
    midnight = datetime.fromtimestamp(now - now % 86400, tz=UTC)
    rows = (
        RequestLog.objects.filter(api_key_id__in=capped)
        .values("api_key_id")
        .annotate(total=Sum("cost_nano"), today=Sum("cost_nano", filter=Q(created_at__gte=midnight)))
    )
    return {
        r["api_key_id"]: {"spent_day": day, "spent_today": r["today"] or 0, "spent_total": r["total"] or 0}
        for r in rows
    }
