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
import glob
import itertools
import os
import pwd
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
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


class BrokerRedis:
    """The topology's own ``redis-server`` on a free port, persisted as ``deploy/compose.yaml`` runs
    it (``--appendonly yes``): tasks queued for the Celery worker survive a restart, as they must
    for "no capture lost". ``stop`` is a clean shutdown (SIGTERM: the append-only file is flushed)."""

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.dir = Path(tempfile.mkdtemp(prefix="gw-resilience-redis-"))
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 15) -> BrokerRedis:
        import redis

        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not installed")
        self.proc = subprocess.Popen(
            [
                binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--dir",
                str(self.dir),
                "--save",
                "",
                "--appendonly",
                "yes",
            ],
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
                    raise RuntimeError("redis-server did not start") from None
                time.sleep(0.05)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)
        self.proc = None

    def destroy(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


class PrivateCluster:
    """A PostgreSQL cluster of the test's own: ``initdb`` in a temp dir, ``pg_ctl`` on a free port
    (as the ``postgres`` user when run as root, which initdb requires). The outage test stops and
    starts it; the machine's server (which other suites share) is never stopped."""

    def __init__(self) -> None:
        found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
        path = found[-1] if found else shutil.which("pg_ctl")
        if path is None:
            raise RuntimeError("pg_ctl is not installed")
        self.bin = Path(path).parent
        self.port = free_port()
        self.admin_url = f"postgres://postgres@127.0.0.1:{self.port}"
        self.dir = Path(tempfile.mkdtemp(prefix="gw-resilience-pg-"))
        self.data = self.dir / "data"
        self.user = pwd.getpwnam("postgres") if os.geteuid() == 0 else None
        if self.user is not None:
            os.chown(self.dir, self.user.pw_uid, self.user.pw_gid)

    def _run(self, *args: str, timeout: float = 60) -> None:
        cmd = [str(self.bin / args[0]), *args[1:]]
        if self.user is not None:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=self.dir)
        if done.returncode != 0:
            raise RuntimeError(f"{args[0]} failed: {done.stdout[-2000:]}{done.stderr[-2000:]}")

    def init(self) -> PrivateCluster:
        self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync")
        return self.start()

    def start(self) -> PrivateCluster:
        opts = (
            f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200"
        )
        self._run("pg_ctl", "-D", str(self.data), "-o", opts, "-l", str(self.dir / "log"), "-w", "start")
        return self

    def stop(self) -> None:
        """A fast shutdown: open sessions are cut, as when the database host goes away."""
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")

    def destroy(self) -> None:
        try:
            self.stop()
        except Exception:
            pass
        shutil.rmtree(self.dir, ignore_errors=True)


class Postgres:
    """A throw-away database ``gateway_scaleout_<random>`` on ``admin_url``'s server, dropped after."""

    def __init__(self, admin_url: str = PG_ADMIN_URL) -> None:
        self.admin_url = admin_url
        self.name = f"gateway_scaleout_{secrets.token_hex(4)}"
        self.url = f"{admin_url}/{self.name}"

    def _admin(self, sql: str) -> None:
        import psycopg

        with psycopg.connect(f"{self.admin_url}/postgres", autocommit=True, connect_timeout=5) as conn:
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


class Supervised(Process):
    """A process restarted when it exits on its own, as ``restart: unless-stopped`` does in
    ``deploy/compose.yaml``: the Celery worker can die on a lost broker connection (kombu's
    "Unrecoverable error: AttributeError(... 'hostname')" race while restoring unacknowledged
    messages), and a deployment runs it under a process manager. ``restarts`` counts them."""

    def __init__(self, name: str, cmd: list[str], env: dict[str, str]) -> None:
        super().__init__(name, cmd, env)
        self.restarts = 0
        self._stopping = threading.Event()
        self._watch: threading.Thread | None = None

    def start(self) -> Supervised:
        super().start()
        if self._watch is None:
            self._stopping.clear()
            self._watch = threading.Thread(target=self._supervise, name=f"supervise-{self.name}", daemon=True)
            self._watch.start()
        return self

    def _supervise(self) -> None:
        while not self._stopping.wait(0.5):
            if self.proc is not None and self.proc.poll() is not None and not self._stopping.is_set():
                self.restarts += 1
                self._log.close()
                super().start()

    def stop(self) -> None:
        self._stopping.set()
        if self._watch is not None:
            self._watch.join(5)
            self._watch = None
        super().stop()


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
            "gateway.serving:GuardedHttpToolsProtocol",
            "--timeout-keep-alive",
            "5",
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
            "GATEWAY_SECURE_COOKIES": "0",  # plain HTTP on loopback: the admin session cookie must flow
            # The churn test holds 2,000 client connections on instance a's two workers, which
            # share the listening socket unevenly: the default cap (1,000 per worker) would shed.
            "GATEWAY_CLIENT_MAX_CONNECTIONS": "2500",
        }
    )
    return env


def celery_worker(env: dict[str, str]) -> Supervised:
    celery = str(Path(sys.executable).with_name("celery"))
    cmd = [
        celery,
        "-A",
        "gateway",
        "worker",
        "--concurrency",
        "2",  # as deploy/compose.yaml runs it (prefork, two processes)
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
    return Supervised("celery", cmd, env)
