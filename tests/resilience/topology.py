"""The scale-out topology on loopback, as ``deploy/compose.yaml`` runs it on one host: a database
of its own on PostgreSQL, Redis, two gateway instances (``uvicorn --workers 2`` each), a Celery
worker for captures, and a round-robin balancer in front.

The balancer is a small asyncio TCP proxy (``Balancer``), not nginx: the test must take one
instance out of rotation before stopping it (what an orchestrator does when ``/readyz`` turns
503), and retry on the other when a connection is refused (nginx's ``proxy_next_upstream error``).
``deploy/nginx.conf`` is the nginx equivalent used by the compose file.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

from tests.servers import LOG_DIR, ROOT, free_port

PG_ADMIN_URL = os.environ.get("RESILIENCE_PG_URL", "postgres://postgres@127.0.0.1:5432")


def run(cmd: list[str], env: dict[str, str], timeout: float = 120) -> str:
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"{cmd} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return done.stdout


class Postgres:
    """A throw-away database ``gateway_scaleout_<random>`` on the local server, dropped after."""

    def __init__(self) -> None:
        self.name = f"gateway_scaleout_{secrets.token_hex(4)}"
        self.url = f"{PG_ADMIN_URL}/{self.name}"

    def _admin(self, sql: str) -> None:
        import psycopg

        with psycopg.connect(f"{PG_ADMIN_URL}/postgres", autocommit=True, connect_timeout=5) as conn:
            conn.execute(sql)

    def create(self) -> Postgres:
        self._admin(f'CREATE DATABASE "{self.name}"')
        return self

    def query(self, sql: str, *args) -> list[tuple]:
        import psycopg

        with psycopg.connect(self.url, autocommit=True, connect_timeout=5) as conn:
            return conn.execute(sql, args).fetchall()

    def drop(self) -> None:
        self._admin(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')


class Process:
    """A subprocess in its own session (signals reach its children), logging to a file."""

    def __init__(self, name: str, cmd: list[str], env: dict[str, str]) -> None:
        LOG_DIR.mkdir(parents=True, exist_ok=True)
        self.name = name
        self.cmd = cmd
        self.env = env
        self.log_path = LOG_DIR / f"topo-{name}-{os.getpid()}.log"
        self.proc: subprocess.Popen | None = None

    def start(self) -> Process:
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            self.cmd,
            cwd=ROOT,
            env=self.env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        return self

    def log(self) -> str:
        return self.log_path.read_text("utf-8", "replace") if self.log_path.exists() else ""

    def terminate(self, timeout: float = 30) -> int | None:
        """SIGTERM to the main process (uvicorn's supervisor forwards it to its workers)."""
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else None
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            return self.proc.wait(timeout=5)

    def stop(self) -> None:
        self.terminate()
        if getattr(self, "_log", None) is not None:
            self._log.close()


class Instance(Process):
    """One gateway instance: ``uvicorn gateway.asgi:application --workers 2`` on its own port."""

    def __init__(self, name: str, env: dict[str, str], workers: int = 2, grace: float = 10) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        cmd = [
            sys.executable,
            "-m",
            "uvicorn",
            "gateway.asgi:application",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--workers",
            str(workers),
            "--loop",
            "uvloop",
            "--http",
            "httptools",
            "--lifespan",
            "on",
            "--no-access-log",
            "--timeout-graceful-shutdown",
            str(grace),
        ]
        super().__init__(name, cmd, env)

    def wait_ready(self, timeout: float = 60) -> float:
        """Until ``/readyz`` says 200 on several connections in a row (both workers up)."""
        t0 = time.monotonic()
        ok = 0
        while ok < 6:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited:\n{self.log()[-5000:]}")
            try:
                ok = ok + 1 if httpx.get(self.url + "/readyz", timeout=2).status_code == 200 else 0
            except httpx.TransportError:
                ok = 0
            if time.monotonic() - t0 > timeout:
                raise RuntimeError(f"{self.name} not ready in {timeout}s:\n{self.log()[-5000:]}")
            time.sleep(0.05 if ok else 0.2)
        return time.monotonic() - t0


class Balancer:
    """Round-robin TCP balancer on 127.0.0.1 (its own event loop in a thread). A backend that
    refuses the connection is skipped (the request goes to the next one); ``disable`` takes a
    backend out of rotation, as a balancer does when its health check fails."""

    def __init__(self, backends: list[int]) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.backends = list(backends)
        self.disabled: set[int] = set()
        self.retried = 0
        self._rr = itertools.count()
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="balancer", daemon=True)

    def start(self) -> Balancer:
        self._thread.start()
        assert self._ready.wait(10)
        return self

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._server = self._loop.run_until_complete(
            asyncio.start_server(self._handle, "127.0.0.1", self.port)
        )
        self._ready.set()
        self._loop.run_forever()

    def set_backend(self, index: int, port: int) -> None:
        self.backends[index] = port

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        order = [p for p in self.backends if p not in self.disabled] or list(self.backends)
        start = next(self._rr) % len(order)
        upstream = None
        for i in range(len(order)):
            port = order[(start + i) % len(order)]
            try:
                upstream = await asyncio.open_connection("127.0.0.1", port)
                break
            except OSError:
                self.retried += 1
        if upstream is None:
            writer.close()
            return
        up_reader, up_writer = upstream

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                try:
                    dst.close()
                except Exception:
                    pass

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    def stop(self) -> None:
        def _close() -> None:
            self._server.close()
            self._loop.stop()

        self._loop.call_soon_threadsafe(_close)
        self._thread.join(5)


def base_env(db_url: str, redis_url: str, data_dir: Path, secret_key: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "DATABASE_URL", "GATEWAY_TEST_DB")}
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "gateway.settings",
            "DATABASE_URL": db_url,
            "REDIS_URL": redis_url,
            "SECRET_KEY": secret_key,
            "GATEWAY_DATA_DIR": str(data_dir),
            "GATEWAY_CONFIG_POLL_SECONDS": "0.2",
            "GATEWAY_CAPTURE_RETRY_SECONDS": "0.5",
            "PYTHONUNBUFFERED": "1",
            "LOG_LEVEL": "WARNING",
        }
    )
    return env


def celery_worker(env: dict[str, str]) -> Process:
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
        f"topo-{os.getpid()}@%h",
    ]
    return Process("celery", cmd, env)
