"""Scale-out on loopback (``make test-resilience``): two gateway instances of two workers each on
PostgreSQL and Redis, a Celery worker writing captures, a round-robin balancer in front. Each test
states one property of the topology; the figures are written to ``tests/resilience/RESULTS.md``.

Bounded: the topology starts once per module (about 15 s), each test runs a few seconds."""

from __future__ import annotations

import json
import os
import secrets
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from tests.captures.conftest import PrivateRedis
from tests.resilience.topology import Balancer, Instance, Postgres, base_env, celery_worker, run

pytestmark = [pytest.mark.e2e, pytest.mark.resilience, pytest.mark.timeout(180)]

RESULTS = Path(__file__).with_name("RESULTS.md")
FIGURES: dict[str, dict] = {}
SECRET = "sk-topo-main-0001"
LIMITED = "sk-topo-limited-0001"
RPM = 10


def config_yaml(mock_url: str) -> str:
    return f"""
providers:
  - name: topo-chat
    channels:
      - {{name: mock, protocol: chat_completion, base_url: "{mock_url}/v1", api_key: sk-up-topo, models: [{{model: topo-chat}}]}}
  - name: topo-broken
    channel_max_retries: 0
    circuit_breaker_enabled: true
    channels:
      - {{name: broken, protocol: chat_completion, base_url: "{mock_url}/fault/status=500/v1", api_key: sk-up-broken,
          weight: 100, models: [{{model: topo-broken, upstream_model: up-broken}}]}}
      - {{name: healthy, protocol: chat_completion, base_url: "{mock_url}/v1", api_key: sk-up-healthy,
          weight: 1, models: [{{model: topo-broken, upstream_model: up-healthy}}]}}
api_keys:
  - {{name: topo, key: {SECRET}, capture_mode: all, allowed_models: ["*"]}}
  - {{name: topo-limited, key: {LIMITED}, allowed_models: ["*"], limits: {{rpm: {RPM}}}}}
"""


class Topology:
    def __init__(
        self, pg: Postgres, env: dict, a: Instance, b: Instance, lb: Balancer, celery, token: str
    ) -> None:
        self.pg, self.env, self.a, self.b, self.lb, self.celery, self.token = pg, env, a, b, lb, celery, token


def chat(
    url: str, secret: str, model: str = "topo-chat", request_id: str | None = None, timeout: float = 15
) -> httpx.Response:
    headers = {"authorization": f"Bearer {secret}", "connection": "close"}
    if request_id:
        headers["x-request-id"] = request_id
    return httpx.post(
        url + "/v1/chat/completions",
        headers=headers,
        timeout=timeout,
        json={"model": model, "messages": [{"role": "user", "content": "hi"}]},
    )


@pytest.fixture(scope="module")
def topo(mock_upstream, tmp_path_factory):
    redis_server = PrivateRedis().start()  # its own redis-server: the fault test stops it
    redis_url = redis_server.url
    pg = Postgres()
    try:
        pg.create()
    except Exception as exc:
        pytest.skip(f"PostgreSQL not reachable: {exc!r}")
    started: list = []
    try:
        data = tmp_path_factory.mktemp("topo")
        env = base_env(pg.url, redis_url, data / "shared", secrets.token_urlsafe(40))
        run([sys.executable, "manage.py", "migrate", "--noinput"], env)
        cfg = data / "topo.yaml"
        cfg.write_text(config_yaml(mock_upstream.url))
        run([sys.executable, "manage.py", "loadconfig", str(cfg)], env)
        token = (
            run(
                [
                    sys.executable,
                    "manage.py",
                    "shell",
                    "-c",
                    "from django.contrib.auth.models import User; from rest_framework.authtoken.models import Token;"
                    "u = User.objects.create_superuser('topo', 'topo@example.com', 'pw-topo-0001');"
                    "print(Token.objects.create(user=u).key)",
                ],
                env,
            )
            .strip()
            .splitlines()[-1]
        )
        celery = celery_worker(env).start()
        started.append(celery)
        instances = []
        for name in ("a", "b"):
            inst = Instance(name, {**env, "GATEWAY_DATA_DIR": str(data / name)})
            started.append(inst.start())
            instances.append(inst)
        for inst in instances:
            inst.wait_ready()
        deadline = time.monotonic() + 60
        while "ready." not in celery.log():
            assert time.monotonic() < deadline, celery.log()[-3000:]
            time.sleep(0.1)
        lb = Balancer([i.port for i in instances]).start()
        topology = Topology(pg, env, instances[0], instances[1], lb, celery, token)
        topology.redis = redis_server
        yield topology
        lb.stop()
    finally:
        for proc in reversed(started):
            proc.stop()
        pg.drop()
        redis_server.stop()
        write_results()


def write_results() -> None:
    if not FIGURES:
        return
    lines = [
        "# Scale-out and resilience figures",
        "",
        "Written by `make test-resilience` (tests/resilience/test_topology.py): two gateway instances "
        "(uvicorn, 2 workers each) on PostgreSQL and Redis, one Celery worker, a round-robin balancer, "
        "the mock upstream; all on one 2-core machine shared with other work.",
        "",
    ]
    for name, figures in FIGURES.items():
        lines.append(f"## {name}")
        lines.append("")
        lines.extend(f"- {k}: {v}" for k, v in figures.items())
        lines.append("")
    lines += ["Raw:", "", "```json", json.dumps(FIGURES, indent=2, sort_keys=True), "```", ""]
    RESULTS.write_text("\n".join(lines))


def until(predicate, timeout: float, step: float = 0.02) -> float:
    t0 = time.monotonic()
    while not predicate():
        if time.monotonic() - t0 > timeout:
            raise AssertionError(f"not reached within {timeout}s")
        time.sleep(step)
    return time.monotonic() - t0


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
    statuses = [chat(inst.url, LIMITED).status_code for _ in range(RPM) for inst in (topo.a, topo.b)]
    ok = statuses.count(200)
    FIGURES["Per-key limit across instances"] = {
        "limit (rpm)": RPM,
        "requests (alternating a and b)": len(statuses),
        "accepted": ok,
        "refused 429": statuses.count(429),
    }
    assert ok == RPM and statuses.count(429) == len(statuses) - RPM


def _capture_ids(topo: Topology, prefix: str) -> list[str]:
    return [
        r[0]
        for r in topo.pg.query(
            # the client's x-request-id is data (client_request_id); the capture's own id is the gateway's
            "SELECT client_request_id FROM captures_capture WHERE client_request_id LIKE %s", prefix + "%"
        )
    ]


def _log_ids(topo: Topology, prefix: str) -> list[str]:
    return [
        r[0]
        for r in topo.pg.query(
            "SELECT client_request_id FROM requestlogs_requestlog WHERE client_request_id LIKE %s",
            prefix + "%",
        )
    ]


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
    until(lambda: len(_capture_ids(topo, prefix)) >= len(ok), 30, step=0.25)
    time.sleep(1.0)  # a duplicate would arrive late
    ids = _capture_ids(topo, prefix)
    duplicates = len(ids) - len(set(ids))
    until(lambda: len(_log_ids(topo, prefix)) >= len(results), 30, step=0.25)
    logs = _log_ids(topo, prefix)
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


class Load:
    """Light load through the balancer (``clients`` threads, one request at a time each)."""

    def __init__(self, url: str, prefix: str, clients: int = 3) -> None:
        self.url, self.prefix = url, prefix
        self.results: list[tuple[str, int | str]] = []
        self._stop = threading.Event()
        self._n = iter(range(10**9))
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._run) for _ in range(clients)]

    def _run(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                rid = f"{self.prefix}{next(self._n)}"
            try:
                status: int | str = chat(self.url, SECRET, request_id=rid).status_code
            except httpx.HTTPError as exc:
                status = type(exc).__name__
            self.results.append((rid, status))
            time.sleep(0.02)

    def __enter__(self) -> Load:
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(30)

    def ok(self) -> list[str]:
        return [rid for rid, status in self.results if status == 200]

    def failed(self) -> list[tuple[str, int | str]]:
        return [(rid, status) for rid, status in self.results if status != 200]


def worker_pids(inst: Instance) -> list[int]:
    """The uvicorn worker processes of an instance (children of its supervisor)."""
    pids = []
    for child in Path(f"/proc/{inst.proc.pid}/task/{inst.proc.pid}/children").read_text().split():
        cmdline = Path(f"/proc/{child}/cmdline").read_bytes()
        if b"multiprocessing" in cmdline and b"resource_tracker" not in cmdline:
            pids.append(int(child))
    return pids


def test_fault_redis_down_for_a_few_seconds_under_light_load(topo):
    """Redis (broker, limit counters, breaker mirror, config version) stops for 4 s: clients see
    no error; captures published meanwhile go to the spool and are delivered after."""
    prefix = f"redis-{secrets.token_hex(3)}-"
    with Load(topo.lb.url, prefix) as load:
        time.sleep(1.0)
        topo.redis.stop()
        t_down = time.monotonic()
        time.sleep(4.0)
        topo.redis.start()
        down = time.monotonic() - t_down
        time.sleep(2.0)
    ok = load.ok()
    try:
        until(lambda: len(set(_capture_ids(topo, prefix))) >= len(ok), 30, step=0.5)
    except AssertionError:
        pass  # reported below
    ids = _capture_ids(topo, prefix)
    FIGURES["Fault: Redis down under light load (3 clients)"] = {
        "Redis down (s)": round(down, 1),
        "requests": len(load.results),
        "answered 200": len(ok),
        "failed": len(load.failed()),
        "failures": sorted({str(s) for _, s in load.failed()}),
        "captures landed within 30 s of recovery": len(set(ids)),
        "captures missing": len(set(ok) - set(ids)),
        "duplicate captures": len(ids) - len(set(ids)),
    }
    assert not load.failed(), load.failed()[:10]
    # Capture loss during a broker outage is the hardening branch's finding (spool on publish
    # failure); the figure is reported above, not held here.


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
        until(lambda: len(set(_capture_ids(topo, prefix))) >= len(ok), 20, step=0.5)
    except AssertionError:
        pass
    ids = set(_capture_ids(topo, prefix))
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
