"""Routing policy: the key's model redirects and allow-list, then the provider waterfall and the
weighted channel order. Pure functions over the snapshot; no I/O."""

from __future__ import annotations

import random

from .breaker import BreakerBoard
from .globs import any_glob
from .snapshot import ChannelSnap, KeySnap, Route, Snapshot


def resolve_logical_model(key: KeySnap, model: str, global_redirects: tuple = ()) -> str:
    """Redirects are regexes matched against the whole name: the key's rules, then the global
    ones (settings); the first match rewrites the model (once). The result is the logical model:
    what routing, transform globs and the client-facing ``model`` field use."""
    for pattern, replace in key.redirects:
        if pattern.fullmatch(model):
            return replace
    for pattern, replace in global_redirects:
        if pattern.fullmatch(model):
            return replace
    return model


def model_allowed(key: KeySnap, logical_model: str) -> bool:
    return key.allowed_models is None or any_glob(key.allowed_models, logical_model)


def weighted_order(
    pairs: tuple[tuple[ChannelSnap, str], ...], rng: random.Random | None = None
) -> list[tuple[ChannelSnap, str]]:
    """Weighted random order without replacement (Efraimidis–Spirakis: sort by u^(1/w))."""
    if len(pairs) <= 1:
        return list(pairs)
    rand = (rng or random).random
    keyed = [(rand() ** (1.0 / pair[0].weight), i) for i, pair in enumerate(pairs)]
    keyed.sort(reverse=True)
    return [pairs[i] for _, i in keyed]


def candidates(
    snapshot: Snapshot, logical_model: str, breaker: BreakerBoard, rng: random.Random | None = None
) -> list[tuple[Route, list[tuple[ChannelSnap, str]]]] | None:
    """Providers by priority, each with its channels in weighted random order, open circuits
    skipped (for providers with the breaker on). If that leaves nothing, every channel is tried
    anyway rather than failing closed. None when no provider serves the model."""
    routes = snapshot.routes.get(logical_model)
    if not routes:
        return None
    plan = []
    total = 0
    for route in routes:
        ordered = weighted_order(route.channels, rng)
        if route.provider.circuit_breaker_enabled:
            healthy = [pair for pair in ordered if not breaker.is_open(pair[0].id)]
        else:
            healthy = ordered
        plan.append((route, ordered, healthy))
        total += len(healthy)
    if total == 0:
        return [(route, ordered) for route, ordered, _ in plan]
    return [(route, healthy) for route, _, healthy in plan if healthy]
