"""The in-process configuration snapshot the hot path reads, and its live reload.

Everything a request needs (keys by hash, providers with decrypted channel keys, compiled
transform chains, global settings) is built once from the database into plain immutable
objects. A background thread polls ``gateway.config_version.current()`` and, when the version
moves, builds a new snapshot and swaps one reference; a request keeps using the snapshot it
started with. The same thread writes API keys' ``last_used_at`` in batches, off the request path.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from transforms.base import Transform, TransformContext, TransformFailed
from transforms.engine import CompiledRule

log = logging.getLogger("gateway.proxy.snapshot")

LAST_USED_FLUSH_SECONDS = 5.0


class TransformInitFailed(TransformFailed):
    """A stored rule could not be instantiated (unknown id, config its class refuses): 500
    ``transform_init_failed`` when a request reaches it, never a crash of the snapshot build."""


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


@dataclass(slots=True, frozen=True)
class ChannelSnap:
    id: int
    name: str
    provider_id: int
    protocol: str
    base_url: str
    api_key: str
    weight: int
    extra_headers: tuple[tuple[str, str], ...]
    models: dict[str, str]  # logical model -> upstream model


@dataclass(slots=True, frozen=True)
class ProviderSnap:
    id: int
    name: str
    priority: int
    max_retries: int
    channel_max_retries: int
    channel_retry_interval_ms: int
    request_timeout: float | None
    circuit_breaker_enabled: bool
    strip_nested: bool | None  # None: inherit the global setting
    extra_fields_whitelist: tuple[str, ...] | None
    chain: tuple[CompiledRule, ...]
    channels: tuple[ChannelSnap, ...]
    affinity_mode: str = "off"  # off | sticky | prefer_higher_priority (see affinity.py)
    affinity_failback: float = 300.0


@dataclass(slots=True, frozen=True)
class KeySnap:
    id: int
    name: str
    enabled: bool
    expires_at: float | None
    allowed_models: tuple[str, ...] | None  # None: every model
    redirects: tuple[tuple[re.Pattern, str], ...]
    capture_mode: str
    chain: tuple[CompiledRule, ...]
    owner_username: str | None = None  # identity for transforms (TransformContext.username)


@dataclass(slots=True, frozen=True)
class SettingsSnap:
    capture_enabled: bool = False
    strip_cross_protocol_nested: bool = True
    request_timeout: float = 300.0
    connect_timeout: float = 10.0
    idle_timeout: float = 120.0


@dataclass(slots=True, frozen=True)
class Route:
    """One provider serving a logical model, with its eligible (channel, upstream model) pairs."""

    provider: ProviderSnap
    channels: tuple[tuple[ChannelSnap, str], ...]


@dataclass(slots=True, frozen=True)
class Snapshot:
    version: int
    redis_version: int
    built_at: float
    keys_by_hash: dict[str, KeySnap]
    providers: tuple[ProviderSnap, ...]
    global_chain: tuple[CompiledRule, ...]
    settings: SettingsSnap
    routes: dict[str, tuple[Route, ...]] = field(default_factory=dict)

    @property
    def model_names(self) -> list[str]:
        return sorted(self.routes)


# -- building ---------------------------------------------------------------------------------

def compile_rule(rule) -> CompiledRule | None:
    """A stored TransformRule as the engine runs it; None for a disabled rule or one that is not
    allowed in its scope (dropped at load time, like the reference)."""
    from transforms.registry import canonical_id, registry

    if not rule.enabled:
        return None
    type_id = canonical_id(rule.transform)
    cls = registry().get(type_id)
    # null: every model; a list: one glob must match, so an empty list matches nothing (the
    # admin form turns an empty input into null).
    models = tuple(rule.models) if rule.models is not None else None
    if cls is None:
        transform: Transform = BrokenTransform(type_id, "unknown transform")
    elif rule.scope not in cls.scopes:
        log.warning("dropping rule %s: %s is not allowed in the %s scope", rule.pk, type_id, rule.scope)
        return None
    else:
        try:
            transform = cls(rule.config or {})
        except Exception as exc:
            log.exception("rule %s (%s) failed to initialise", rule.pk, type_id)
            transform = BrokenTransform(type_id, f"{type(exc).__name__}")
    return CompiledRule(rule_id=rule.pk, scope=rule.scope, phase=rule.phase, models=models, transform=transform)


def _compile_redirects(raw) -> tuple[tuple[re.Pattern, str], ...]:
    out = []
    for rule in raw or ():
        try:
            out.append((re.compile(f"(?:{rule['pattern']})"), str(rule["replace"])))
        except (re.error, KeyError, TypeError):
            log.warning("skipping an invalid model redirect %r", rule)
    return tuple(out)


def build_snapshot(version: tuple[int, int] = (0, 0)) -> Snapshot:
    """Read the whole configuration (a handful of queries). Runs in the poller thread, or in a
    test; never on the event loop."""
    from gateway.models import GlobalSettings
    from keys.models import ApiKey
    from providers.models import Provider
    from transforms.models import TransformRule

    chains: dict[tuple[str, int | None], list[CompiledRule]] = {}
    for rule in TransformRule.objects.order_by("position", "id"):
        compiled = compile_rule(rule)
        if compiled is not None:
            owner = rule.provider_id if rule.scope == "provider" else rule.api_key_id if rule.scope == "api_key" else None
            chains.setdefault((rule.scope, owner), []).append(compiled)

    gs = GlobalSettings.objects.filter(pk=1).first() or GlobalSettings()
    settings_snap = SettingsSnap(
        capture_enabled=gs.capture_enabled, strip_cross_protocol_nested=gs.strip_cross_protocol_nested,
        request_timeout=gs.request_timeout_seconds, connect_timeout=gs.connect_timeout_seconds,
        idle_timeout=min(gs.upstream_idle_timeout_seconds, float(settings.GATEWAY["UPSTREAM_IDLE_TIMEOUT"])))

    providers = []
    for p in Provider.objects.filter(enabled=True).prefetch_related("channels__models").order_by("priority", "id"):
        channels = []
        for ch in sorted(p.channels.all(), key=lambda c: c.id):
            if not ch.enabled:
                continue
            models = {m.model: (m.upstream_model or m.model) for m in ch.models.all()}
            headers = tuple(sorted((str(k), str(v)) for k, v in (ch.extra_headers or {}).items()))
            channels.append(ChannelSnap(id=ch.id, name=ch.name, provider_id=p.id, protocol=ch.protocol,
                                        base_url=ch.base_url, api_key=ch.get_api_key(), weight=ch.weight,
                                        extra_headers=headers, models=models))
        wl = p.extra_fields_whitelist
        providers.append(ProviderSnap(
            id=p.id, name=p.name, priority=p.priority, max_retries=p.max_retries,
            channel_max_retries=p.channel_max_retries, channel_retry_interval_ms=p.channel_retry_interval_ms,
            request_timeout=p.request_timeout_seconds, circuit_breaker_enabled=p.circuit_breaker_enabled,
            strip_nested=p.strip_nested_override,
            extra_fields_whitelist=tuple(wl) if isinstance(wl, list) else None,
            chain=tuple(chains.get(("provider", p.id), ())), channels=tuple(channels),
            affinity_mode=p.affinity_mode, affinity_failback=float(p.affinity_failback_seconds)))

    routes: dict[str, list[Route]] = {}
    for p in providers:
        per_model: dict[str, list[tuple[ChannelSnap, str]]] = {}
        for ch in p.channels:
            if ch.weight <= 0:
                continue
            for logical, upstream in ch.models.items():
                per_model.setdefault(logical, []).append((ch, upstream))
        for logical, pairs in per_model.items():
            routes.setdefault(logical, []).append(Route(provider=p, channels=tuple(pairs)))

    keys = {}
    for k in ApiKey.objects.select_related("owner"):
        keys[k.key_hash] = KeySnap(
            id=k.id, name=k.name, enabled=k.enabled,
            expires_at=k.expires_at.timestamp() if k.expires_at else None,
            allowed_models=tuple(k.allowed_models) if k.allowed_models else None,
            redirects=_compile_redirects(k.model_redirects), capture_mode=k.capture_mode or "off",
            chain=tuple(chains.get(("api_key", k.id), ())),
            owner_username=k.owner.get_username() if k.owner_id else None)

    return Snapshot(version=version[0], redis_version=version[1], built_at=time.time(), keys_by_hash=keys,
                    providers=tuple(providers), global_chain=tuple(chains.get(("global", None), ())),
                    settings=settings_snap, routes={m: tuple(r) for m, r in routes.items()})


# -- holding and reloading ------------------------------------------------------------------------

class SnapshotHolder:
    """Owns the current snapshot and the poller thread. ``current`` is read without a lock: the
    swap is one reference assignment."""

    def __init__(self) -> None:
        self.current: Snapshot | None = None
        self.ready = threading.Event()
        self._version: tuple[int, int] | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._last_used: set[int] = set()
        self._last_flush = time.monotonic()
        self._lock = threading.Lock()

    def set(self, snapshot: Snapshot) -> None:
        """Install a snapshot directly (tests, or a caller that built one itself)."""
        self.current = snapshot
        self.ready.set()

    def touch(self, key_id: int) -> None:
        """Note a key use; written to the database in the next batch."""
        self._last_used.add(key_id)

    def start(self) -> None:
        with self._lock:
            if self._thread is not None and self._thread.is_alive():
                return
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="gateway-config-poller", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        thread = self._thread
        if thread is not None:
            thread.join(timeout=5)
        self._thread = None
        self._flush_last_used()

    def reload_if_changed(self) -> bool:
        """One poll: rebuild when the version moved. True when a new snapshot was installed."""
        from gateway.config_version import current

        version = current()
        if version == self._version and self.current is not None:
            return False
        snapshot = build_snapshot(version)
        self._version = version
        self.set(snapshot)
        log.info("configuration snapshot %s loaded", version)
        return True

    def _flush_last_used(self) -> None:
        if not self._last_used:
            return
        pending, self._last_used = self._last_used, set()
        # One C-level copy (atomic under the GIL): the event loop may still add to ``pending``.
        ids = list(pending)
        try:
            from django.utils import timezone

            from keys.models import ApiKey

            ApiKey.objects.filter(id__in=ids).update(last_used_at=timezone.now())
        except Exception:
            log.warning("could not record API key use", exc_info=True)
        self._last_flush = time.monotonic()

    def _run(self) -> None:
        from django.db import connection

        poll = float(settings.GATEWAY["CONFIG_POLL_SECONDS"])
        while not self._stop.is_set():
            try:
                self.reload_if_changed()
                if time.monotonic() - self._last_flush >= LAST_USED_FLUSH_SECONDS:
                    self._flush_last_used()
            except Exception:
                log.exception("configuration reload failed; keeping the previous snapshot")
                try:
                    connection.close()
                except Exception:
                    pass
            self._stop.wait(poll)
        try:
            connection.close()
        except Exception:
            pass
