"""Fixtures for the capture end-to-end tests: a real Celery worker (subprocess) on a Redis
database of its own, and private ``redis-server`` instances a test may stop and restart (the
machine's shared Redis on 6379 is never stopped)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.servers import LOG_DIR, ROOT, database_url, free_port

CAPTURE_REDIS_URL = os.environ.get("CAPTURE_REDIS_URL_FOR_TESTS", "redis://127.0.0.1:6379/14")


def redis_or_skip(url: str) -> None:
    import redis

    try:
        redis.Redis.from_url(url, socket_connect_timeout=1).ping()
    except redis.RedisError:
        if os.environ.get("GATEWAY_REQUIRE_SERVICES") == "1":
            raise
        pytest.skip(f"Redis not reachable at {url}")


class CeleryWorker:
    """``celery -A gateway worker --pool solo -Q captures,celery`` on the test database."""

    def __init__(self, redis_url: str) -> None:
        from django.conf import settings

        self.redis_url = redis_url
        LOG_DIR.mkdir(parents=True, exist_ok=True)
        self.log_path = LOG_DIR / f"celery-{os.getpid()}-{free_port()}.log"
        env = {
            k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "DATABASE_URL", "GATEWAY_TEST_DB")
        }
        env.update(
            {
                "DJANGO_SETTINGS_MODULE": "gateway.settings",
                "DATABASE_URL": database_url(),
                "SECRET_KEY": settings.SECRET_KEY,
                "REDIS_URL": redis_url,
                "PYTHONUNBUFFERED": "1",
            }
        )
        self.env = env
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 60) -> CeleryWorker:
        celery = str(Path(sys.executable).with_name("celery"))
        cmd = [
            celery,
            "-A",
            "gateway",
            "worker",
            "--pool",
            "solo",
            "-Q",
            "captures,celery",
            "-l",
            "INFO",
            "--without-heartbeat",
            "--without-gossip",
            "--without-mingle",
            "-n",
            f"capture-test-{os.getpid()}@%h",
        ]
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            cmd, cwd=ROOT, env=self.env, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True
        )
        deadline = time.monotonic() + timeout
        while "ready." not in self.log():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"celery worker did not start:\n{self.log()[-5000:]}")
            time.sleep(0.1)
        return self

    def log(self) -> str:
        return self.log_path.read_text("utf-8", "replace") if self.log_path.exists() else ""

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=5)
        if getattr(self, "_log", None) is not None:
            self._log.close()


class PrivateRedis:
    """A throw-away ``redis-server`` on a free port (no persistence)."""

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 15) -> PrivateRedis:
        import redis

        binary = shutil.which("redis-server")
        if binary is None:
            pytest.skip("redis-server is not installed")
        self.proc = subprocess.Popen(
            [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        while True:
            try:
                redis.Redis(port=self.port, socket_connect_timeout=0.5).ping()
                return self
            except redis.RedisError:
                if time.monotonic() > deadline:
                    raise RuntimeError("private redis-server did not start") from None
                time.sleep(0.05)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)
        self.proc = None


@pytest.fixture(scope="module")
def capture_redis():
    """The dedicated Redis database for capture tests, emptied first (stale tasks from an earlier
    run must not land in this run's database)."""
    import redis

    redis_or_skip(CAPTURE_REDIS_URL)
    redis.Redis.from_url(CAPTURE_REDIS_URL).flushdb()
    return CAPTURE_REDIS_URL


@pytest.fixture(scope="module")
def celery_worker(django_db_setup, django_db_blocker, capture_redis):
    with django_db_blocker.unblock():
        worker = CeleryWorker(capture_redis).start()
    yield worker
    worker.stop()


@pytest.fixture
def private_redis():
    server = PrivateRedis().start()
    yield server
    server.stop()
