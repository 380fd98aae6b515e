"""Idle resident memory of the gateway's serving workers (issue 20: two workers, <= 150 MB in all).

Starts the server the way ``make run`` does, in a throwaway data directory: ``manage.py migrate``
and ``collectstatic``, ``loadconfig --if-empty config/demo.yaml``, ``ensureadmin``, then ``python -m gateway.launch
--workers 2`` with the launcher's defaults (uvloop, the guarded httptools protocol, lifespan on),
``PROMETHEUS_MULTIPROC_DIR`` set, SQLite, no Redis. Waits until the transform-checks process is
gone and the workers are quiet, then samples the workers' RSS (``/proc/<pid>/status``) a few times
and prints the sum (the median sample) and each worker's. ``--admin`` then logs nothing in but
fetches ``/admin/login/`` once per worker's worth of connections and prints RSS again (what the
first admin page costs a worker that loads the admin lazily).

    .venv/bin/python bench/worker_rss.py [--workers 2] [--samples 5] [--admin]
"""

from __future__ import annotations

import argparse
import os
import secrets
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))

from harness.procs import free_port, pss_mb, rss_mb, stop, wait_port, wait_quiet, worker_pids  # noqa: E402


def environment(data: Path, mock_port: int) -> dict[str, str]:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "gateway.settings",
        "GATEWAY_DATA_DIR": str(data),
        "DATABASE_URL": f"sqlite:///{data / 'db.sqlite3'}",
        "SECRET_KEY": secrets.token_urlsafe(40),
        "MOCK_PORT": str(mock_port),
        "GATEWAY_SECURE_COOKIES": "0",
        "GATEWAY_FETCH_ALLOW_PRIVATE": "1",
        "PROMETHEUS_MULTIPROC_DIR": str(data / "prometheus"),
        "DJANGO_SUPERUSER_PASSWORD": "bench-admin-password",
    }
    for var in ("REDIS_URL", "PYTHONTRACEMALLOC", "PYTHONDEVMODE", GATEWAY_ENV_SKIP):
        env.pop(var, None)
    return env


GATEWAY_ENV_SKIP = "GATEWAY_SKIP_START_CHECKS"  # the launcher sets it for its workers itself


def prepare(env: dict[str, str]) -> None:
    (Path(env["GATEWAY_DATA_DIR"]) / "prometheus").mkdir(parents=True, exist_ok=True)
    for args in (
        ("migrate", "--noinput", "-v", "0"),
        ("collectstatic", "--noinput", "-v", "0"),
        ("loadconfig", "--if-empty", "config/demo.yaml"),
        ("ensureadmin",),
    ):
        subprocess.run(
            [sys.executable, "manage.py", *args], cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL
        )


def sample(pids: list[int], samples: int) -> tuple[float, list[float], float]:
    """The median of ``samples`` sums of the workers' RSS (one a second), that sample's per-worker
    figures, and the PSS sum at the end."""
    taken: list[tuple[float, list[float]]] = []
    for _ in range(samples):
        per = [rss_mb(p) for p in pids]
        taken.append((sum(per), per))
        time.sleep(1)
    taken.sort()
    total, per = taken[len(taken) // 2]
    return total, per, sum(pss_mb(p) for p in pids)


def report(label: str, total: float, per: list[float], pss: float) -> None:
    each = " + ".join(f"{mb:.1f}" for mb in per)
    print(f"{label}: {total:.1f} MB RSS ({each}); PSS {pss:.1f} MB", flush=True)


def touch_admin(port: int, times: int) -> None:
    for _ in range(times):
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/admin/login/", timeout=30) as resp:
            assert resp.status == 200, resp.status
            assert b"csrfmiddlewaretoken" in resp.read()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--samples", type=int, default=5)
    p.add_argument("--settle", type=float, default=3.0, help="seconds to wait once the workers are quiet")
    p.add_argument("--admin", action="store_true", help="then fetch /admin/login/ and measure again")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="worker-rss-") as tmp:
        env = environment(Path(tmp), free_port())
        prepare(env)
        port = free_port()
        cmd = [sys.executable, "-m", "gateway.launch", "--host", "127.0.0.1", "--port", str(port)]
        cmd += ["--workers", str(args.workers), "--log-level", "warning"]
        log = (Path(tmp) / "server.log").open("wb")
        proc = subprocess.Popen(
            cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            wait_port(port, proc, "gateway")
            deadline = time.monotonic() + 60
            while len(worker_pids(proc.pid)) > args.workers and time.monotonic() < deadline:
                time.sleep(0.5)  # the transform-checks process beside the workers has exited
            pids = worker_pids(proc.pid)
            wait_quiet(pids)
            time.sleep(args.settle)
            report(f"idle, {len(pids)} workers", *sample(pids, args.samples))
            if args.admin:
                touch_admin(port, 4 * args.workers)
                wait_quiet(pids)
                report("after /admin/login/", *sample(pids, args.samples))
        finally:
            stop(proc)
            log.close()


if __name__ == "__main__":
    main()
