"""Scale-out on loopback (``make test-resilience``): two gateway instances of two workers each on
PostgreSQL and Redis, a Celery worker writing captures, a round-robin balancer in front. Each test
states one property of the topology; the figures are written to ``tests/resilience/RESULTS.md``.

Bounded: the topology starts once per session (about 15 s, ``conftest.topo``), each test runs a few seconds."""

from __future__ import annotations

import os
import secrets
import threading
import time
from collections import Counter

import httpx
import pytest

from tests.resilience.harness import (
    FIGURES,
    LIMITED,
    RPM,
    SECRET,
    Load,
    capture_ids,
    chat,
    log_ids,
    until,
    worker_pids,
)
from tests.resilience.topology import Instance

pytestmark = [pytest.mark.e2e, pytest.mark.resilience, pytest.mark.timeout(180)]


def test_a_config_change_through_one_instance_reaches_both_within_a_second(topo):
    new_secret = f"sk-topo-late-{secrets.token_hex(6)}"
    t0 = time.monotonic()
    reply = httpx.post(
        topo.a.url + "/api/api-keys/",
        headers={"authorization": f"Token {topo.token}"},
        json={"name": "late", "key": new_secret, "allowed_models": ["*"]},
        timeout=10,
    )
    assert reply.status_code == 201, reply.text
    written = time.monotonic() - t0
    seen: dict[str, float] = {}

    def watch(inst: Instance) -> None:
        # four answers in a row on fresh connections: both workers of the instance have the key
        streak = 0
        while streak < 4 and time.monotonic() - t0 < 10:
            ok = (
                httpx.get(
                    inst.url + "/v1/models",
                    headers={"authorization": f"Bearer {new_secret}", "connection": "close"},
                    timeout=5,
                ).status_code
                == 200
            )
            streak = streak + 1 if ok else 0
            if streak == 1:
                first = time.monotonic() - t0
        if streak == 4:
            seen[inst.name] = first

    watchers = [threading.Thread(target=watch, args=(inst,)) for inst in (topo.a, topo.b)]
    for w in watchers:
        w.start()
    for w in watchers:
        w.join(15)
    load = os.getloadavg()[0] / (os.cpu_count() or 1)
    # The bound holds on a machine that is not oversubscribed; on a shared CI box (load per core
    # well above 1) the figure is reported and only a loose bound is held.
    bound = 1.0 if load < 1.5 else 5.0
    FIGURES["Config change (REST API on instance a)"] = {
        "write answered (s)": round(written, 3),
        "usable on every worker of a, after the write (s)": round(seen.get("a", -1) - written, 3),
        "usable on every worker of b, after the write (s)": round(seen.get("b", -1) - written, 3),
        "load average per core during the run": round(load, 2),
        "bound held (s)": bound,
    }
    assert set(seen) == {"a", "b"}, seen
    assert max(seen.values()) - written < bound, seen


def test_a_breaker_opened_by_one_instance_is_seen_by_the_other(topo, mock_upstream):
    """The model has a broken channel (weight 100) and a healthy one (weight 1): once the broken
    channel's breaker is open, routing skips it."""

    def broken_calls() -> int:
        return sum(1 for r in mock_upstream.requests() if r.get("body", {}).get("model") == "up-broken")

    before = broken_calls()
    statuses = [chat(topo.a.url, SECRET, "topo-broken").status_code for _ in range(12)]
    on_a = broken_calls() - before
    time.sleep(1.5)  # the mirror's pull interval, with room for a loaded machine
    b_statuses = [chat(topo.b.url, SECRET, "topo-broken").status_code for _ in range(8)]
    on_b = broken_calls() - before - on_a
    FIGURES["Breaker shared through Redis"] = {
        "requests on a": len(statuses),
        "calls to the broken channel from a": on_a,
        "requests on b after": len(b_statuses),
        "calls to the broken channel from b": on_b,
        "statuses": sorted(set(statuses + b_statuses)),
    }
    assert 3 <= on_a < len(statuses)  # a stopped calling the broken channel: its breaker opened
    assert on_b == 0  # b (both workers) never called it: the open breaker was shared
    assert set(statuses + b_statuses) == {200}  # failover to the healthy channel answered every request


def test_rate_limits_hold_across_both_instances(topo):
    t0 = time.time()
    statuses = [chat(inst.url, LIMITED).status_code for _ in range(RPM) for inst in (topo.a, topo.b)]
    # The limit counts per minute (fixed windows): on a loaded machine the requests can straddle
    # a minute boundary, and the new window accepts its own RPM.
    windows = int(time.time() // 60) - int(t0 // 60) + 1
    ok = statuses.count(200)
    FIGURES["Per-key limit across instances"] = {
        "limit (rpm)": RPM,
        "requests (alternating a and b)": len(statuses),
        "minute windows they spanned": windows,
        "accepted": ok,
        "refused 429": statuses.count(429),
    }
    assert set(statuses) <= {200, 429}, statuses
    assert ok == RPM if windows == 1 else RPM <= ok <= RPM * windows, (ok, windows)


def _sticky_turn(url: str, messages: list[dict], mock_upstream) -> str:
    """One turn of a conversation on ``topo-sticky``; the channel that served it (the mock sees
    ``up-left`` or ``up-right``)."""
    reply = httpx.post(
        url + "/v1/chat/completions",
        headers={"authorization": f"Bearer {SECRET}", "connection": "close"},
        json={"model": "topo-sticky", "messages": messages},
        timeout=15,
    )
    assert reply.status_code == 200, reply.text
    return mock_upstream.requests()[-1]["body"]["model"]


def test_an_affinity_binding_made_on_one_instance_is_honoured_by_the_other(topo, mock_upstream):
    """``topo-sticky`` (affinity_mode sticky) has two channels of equal weight, tried in weighted
    random order: a conversation's second turn, sent to the other instance, would move with
    probability 1/2 if the binding were not shared through Redis."""
    first_channels, kept = [], 0
    conversations = 12
    for n in range(conversations):
        messages = [{"role": "user", "content": f"conversation {n}: {secrets.token_hex(6)}"}]
        first = _sticky_turn(topo.a.url, messages, mock_upstream)
        time.sleep(0.2)  # the binding is written to Redis after the answer (a next turn comes later)
        messages += [{"role": "assistant", "content": "noted"}, {"role": "user", "content": "and then?"}]
        second = _sticky_turn(topo.b.url, messages, mock_upstream)
        first_channels.append(first)
        kept += first == second
    FIGURES["Affinity binding across instances"] = {
        "conversations (first turn on a, second on b)": conversations,
        "first turns per channel": dict(sorted(Counter(first_channels).items())),
        "second turns on the bound channel": kept,
    }
    assert len(set(first_channels)) == 2, first_channels  # both channels bind: the test can fail
    assert kept == conversations


def test_rolling_restart_under_load_loses_no_request_capture_or_log_row(topo):
    prefix = f"roll-{secrets.token_hex(3)}-"
    results: list[tuple[str, int | str]] = []
    stop = threading.Event()
    counter = iter(range(10**9))
    lock = threading.Lock()

    def load() -> None:
        while not stop.is_set():
            with lock:
                rid = f"{prefix}{next(counter)}"
            try:
                status: int | str = chat(topo.lb.url, SECRET, request_id=rid).status_code
            except httpx.HTTPError as exc:
                status = type(exc).__name__
            results.append((rid, status))
            time.sleep(0.02)

    threads = [threading.Thread(target=load) for _ in range(3)]
    for t in threads:
        t.start()
    restarts = {}
    try:
        time.sleep(1.0)
        for inst in (topo.a, topo.b):
            t0 = time.monotonic()
            topo.lb.disabled.add(inst.port)  # out of rotation first (its /readyz would say so)
            time.sleep(0.3)
            rc = inst.terminate(timeout=30)
            stopped = time.monotonic() - t0
            inst.start()
            inst.wait_ready()
            topo.lb.disabled.discard(inst.port)
            restarts[inst.name] = {
                "exit": rc,
                "stopped after (s)": round(stopped, 2),
                "back in rotation after (s)": round(time.monotonic() - t0, 2),
            }
            assert "Application shutdown complete." in inst.log()
            time.sleep(0.5)
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    ok = [rid for rid, status in results if status == 200]
    failed = [(rid, status) for rid, status in results if status != 200]
    until(lambda: len(capture_ids(topo, prefix)) >= len(ok), 30, step=0.25)
    time.sleep(1.0)  # a duplicate would arrive late
    ids = capture_ids(topo, prefix)
    duplicates = len(ids) - len(set(ids))
    until(lambda: len(log_ids(topo, prefix)) >= len(results), 30, step=0.25)
    logs = log_ids(topo, prefix)
    FIGURES["Rolling restart under load (3 clients through the balancer)"] = {
        "requests": len(results),
        "answered 200": len(ok),
        "failed": len(failed),
        "connections retried on the other instance by the balancer": topo.lb.retried,
        "captures landed": len(set(ids)),
        "duplicate captures": duplicates,
        "request-log rows landed": len(set(logs)),
        "duplicate request-log rows": len(logs) - len(set(logs)),
        **{f"instance {k}": v for k, v in restarts.items()},
    }
    assert not failed, failed[:10]
    assert set(ids) == set(ok) and duplicates == 0
    assert sorted(logs) == sorted(rid for rid, _ in results)  # one request-log row each
    assert len(ok) > 50


def test_fault_sigkill_of_one_worker_mid_load(topo):
    """One of instance a's two workers is SIGKILLed while traffic flows through the balancer."""
    prefix = f"kill-{secrets.token_hex(3)}-"
    pids = worker_pids(topo.a)
    assert len(pids) == 2, pids
    with Load(topo.lb.url, prefix, clients=4) as load:
        time.sleep(1.5)
        os.kill(pids[0], 9)
        t_kill = time.monotonic()
        time.sleep(4.0)
    respawned = None
    try:
        until(lambda: len(worker_pids(topo.a)) == 2, 30, step=0.2)
        respawned = round(time.monotonic() - t_kill, 1)
    except AssertionError:
        pass
    ok = load.ok()
    try:
        until(lambda: len(set(capture_ids(topo, prefix))) >= len(ok), 20, step=0.5)
    except AssertionError:
        pass
    ids = set(capture_ids(topo, prefix))
    FIGURES["Fault: SIGKILL of one worker of instance a mid-load (4 clients)"] = {
        "requests": len(load.results),
        "answered 200": len(ok),
        "failed (in flight on the killed worker)": len(load.failed()),
        "failures": sorted({str(s) for _, s in load.failed()}),
        "captures of answered requests missing (unwritten in the killed worker's queue)": len(set(ok) - ids),
        "worker respawned by uvicorn after (s)": respawned,
        "at-most-lost bound": "the killed worker's in-flight requests + its capture queue "
        "(GATEWAY_CAPTURE_QUEUE_MAX, 1000)",
    }
    # The other worker and instance b keep serving: failures are bounded by what was in flight
    # (at most one request per client: each client has one request outstanding at a time).
    assert len(ok) >= 5 and len(load.failed()) <= 4
