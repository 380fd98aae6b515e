"""The in-process configuration snapshot the hot path reads, and its live reload.

Everything a request needs (keys by hash, providers with decrypted channel keys, compiled
transform chains, global settings) is built once into plain immutable objects. Who builds it is
not the core's business: a ``ConfigSource`` (the project wires ``gateway.live_config``, which
reads the database) says which version is current and builds a snapshot for it. A background
thread polls the version and, when it moves, builds a new snapshot and swaps one reference; a
request keeps using the snapshot it started with. The same thread hands API keys' last use to
the source in batches, off the request path.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Protocol

from .chain import CompiledRule
from .effort_suffix import BUILTIN as BUILTIN_SUFFIXES
from .effort_suffix import Suffixes
from .limits import KeyLimits

log = logging.getLogger("gateway.proxy.snapshot")

LAST_USED_FLUSH_SECONDS = 5.0
FAILURE_LOG_SECONDS = 30.0  # while the configuration source is down, one log line this often


@dataclass(slots=True, frozen=True)
class ModelPrice:
    """USD per million tokens for one channel model (None: not priced in that category; cache
    and reasoning fall back to input and output). ``multiplier`` is the channel model's times
    the provider's. Decimals throughout: a price never passes through a binary float."""

    input: Decimal | None = None
    output: Decimal | None = None
    cache_read: Decimal | None = None
    cache_write: Decimal | None = None
    reasoning: Decimal | None = None
    multiplier: Decimal = Decimal(1)


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
    prices: dict[str, ModelPrice] = field(default_factory=dict)  # logical model -> its price (priced ones)


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
    # Breaker thresholds for this provider's channels (None: the board's global defaults).
    breaker_failures: int | None = None
    breaker_window: float | None = None
    breaker_cooldown: float | None = None
    multiplier: Decimal = Decimal(1)
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
    limits: KeyLimits | None = None  # None: nothing to count or check (the common case)
    reasoning_envelopes: bool = False  # wrap encrypted reasoning in mz2. envelopes (gateway.proxy.envelopes)
    owner_username: str | None = None  # identity for transforms (TransformContext.username)


@dataclass(slots=True, frozen=True)
class SettingsSnap:
    capture_enabled: bool = False
    strip_cross_protocol_nested: bool = True
    request_timeout: float = 300.0
    connect_timeout: float = 10.0
    idle_timeout: float = 120.0
    fetch_allow_private: bool = False
    guard_channel_urls: bool = False
    effort_suffixes: Suffixes = BUILTIN_SUFFIXES  # longest first; see gateway.proxy.effort_suffix
    redirects: tuple[tuple[re.Pattern, str], ...] = ()  # global model redirects, after the key's
    codex_model_ids: tuple[str, ...] = ()  # described to Codex in GET /v1/models (codex_models)


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


def changed_channels(old: Snapshot | None, new: Snapshot) -> set[int]:
    """Channels whose configuration (or whose provider's) differs between two snapshots, or that
    are gone: their breaker state describes a configuration that no longer exists."""
    if old is None:
        return set()

    def fingerprints(snap: Snapshot) -> dict[int, tuple]:
        out = {}
        for p in snap.providers:
            provider_part = (
                p.id,
                p.request_timeout,
                p.circuit_breaker_enabled,
                p.breaker_failures,
                p.breaker_window,
                p.breaker_cooldown,
            )
            for ch in p.channels:
                out[ch.id] = (
                    provider_part,
                    ch.protocol,
                    ch.base_url,
                    ch.api_key,
                    ch.extra_headers,
                    tuple(sorted(ch.models.items())),
                )
        return out

    before, after = fingerprints(old), fingerprints(new)
    return {cid for cid, fp in before.items() if after.get(cid) != fp}


def build_routes(providers: list[ProviderSnap]) -> dict[str, tuple[Route, ...]]:
    """Logical model -> the providers serving it (in priority order) with their eligible
    (channel, upstream model) pairs; channels of weight 0 never serve."""
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
    return {m: tuple(r) for m, r in routes.items()}


class ConfigSource(Protocol):
    """Where snapshots come from. Every method runs in the poller thread, never on the loop."""

    def version(self) -> tuple[int, int]:
        """The current configuration version; a new one means "build again"."""
        ...

    def build(self, version: tuple[int, int]) -> Snapshot:
        """The whole configuration at this version."""
        ...

    def record_key_use(self, key_ids: list[int]) -> None:
        """These API keys were used since the last call."""
        ...

    def release(self) -> None:
        """The thread is idle or stopping: give back what it holds (database connections)."""
        ...


# -- holding and reloading ------------------------------------------------------------------------


class SnapshotHolder:
    """Owns the current snapshot and the poller thread. ``current`` is read without a lock: the
    swap is one reference assignment."""

    def __init__(self, source: ConfigSource, poll_seconds: float = 0.5) -> None:
        self.source = source
        self.poll_seconds = poll_seconds
        self.current: Snapshot | None = None
        self.ready = threading.Event()
        self._version: tuple[int, int] | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._last_used: set[int] = set()
        self._last_flush = time.monotonic()
        self._lock = threading.Lock()
        # Called with (previous, new) after every swap, in the thread that swapped (the poller).
        self.listeners: list[Callable[[Snapshot | None, Snapshot], None]] = []
        # monotonic time of the last poll that reached the source (the database): /readyz
        self.last_poll_ok: float | None = None
        self.stale_after = max(5 * poll_seconds, 3.0)  # no good poll for this long: not ready
        self._failing_since: float | None = None  # monotonic start of a run of failed polls
        self._failure_logged = 0.0

    def set(self, snapshot: Snapshot) -> None:
        """Install a snapshot directly (tests, or a caller that built one itself)."""
        from gateway import fetch

        fetch.set_setting_allow_private(snapshot.settings.fetch_allow_private)
        fetch.set_setting_guard_channels(snapshot.settings.guard_channel_urls)
        previous = self.current
        self.current = snapshot
        self.ready.set()
        for listener in self.listeners:
            try:
                listener(previous, snapshot)
            except Exception:
                log.exception("snapshot listener failed")

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
        version = self.source.version()
        self.last_poll_ok = time.monotonic()
        if version == self._version and self.current is not None:
            return False
        snapshot = self.source.build(version)
        self._version = version
        self.set(snapshot)
        log.info("configuration snapshot %s loaded", version)
        return True

    def readiness(self) -> tuple[bool, str]:
        """Ready for traffic: a snapshot is loaded and the poller reached the source (the
        database) recently. Read on the loop without I/O: the poller thread did the check."""
        if self.current is None:
            return False, "configuration not loaded"
        last = self.last_poll_ok
        if last is None or time.monotonic() - last > self.stale_after:
            return False, "configuration source (database) not reachable"
        return True, "ok"

    def _flush_last_used(self) -> None:
        if not self._last_used:
            return
        pending, self._last_used = self._last_used, set()
        # One C-level copy (atomic under the GIL): the event loop may still add to ``pending``.
        ids = list(pending)
        try:
            self.source.record_key_use(ids)
        except Exception:
            log.warning("could not record API key use", exc_info=True)
        self._last_flush = time.monotonic()

    def _run(self) -> None:
        poll = self.poll_seconds
        while not self._stop.is_set():
            try:
                self.reload_if_changed()
                if time.monotonic() - self._last_flush >= LAST_USED_FLUSH_SECONDS:
                    self._flush_last_used()
            except Exception as exc:
                self._poll_failed(exc)
                self._release()
            else:
                if self._failing_since is not None:
                    log.warning(
                        "configuration source reachable again after %.1f s",
                        time.monotonic() - self._failing_since,
                    )
                    self._failing_since = None
            self._stop.wait(poll)
        self._release()

    def _poll_failed(self, exc: Exception) -> None:
        """A traceback for the first failure of an outage, then a line every
        ``FAILURE_LOG_SECONDS`` (the poller runs several times a second per worker)."""
        now = time.monotonic()
        if self._failing_since is None:
            self._failing_since = self._failure_logged = now
            log.exception("configuration reload failed; keeping the previous snapshot")
        elif now - self._failure_logged >= FAILURE_LOG_SECONDS:
            self._failure_logged = now
            log.warning(
                "configuration reload still failing after %.0f s (%s: %s); keeping the previous snapshot",
                now - self._failing_since,
                type(exc).__name__,
                str(exc).strip()[:200],
            )

    def _release(self) -> None:
        try:
            self.source.release()
        except Exception:
            pass
