"""Real servers for end-to-end tests: the mock upstream (in a thread) and our production ASGI
server (uvicorn + uvloop + httptools, in a subprocess), plus quick config helpers.

The gateway subprocess shares the pytest-django test database (``database_url()``) and the test
process's ``SECRET_KEY`` (so encrypted channel keys and API-key hashes match), and runs without
Redis unless asked. Tests must use ``transactional_db`` so the rows they create are committed and
visible to the server; ``GatewayServer.wait_config()`` then waits until the server's snapshot has
caught up with the database. Fixtures wrapping these live in ``tests/conftest.py``.
"""

from __future__ import annotations

import itertools
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
LOG_DIR = ROOT / "data" / "test-logs"
_names = itertools.count(1)


def free_port() -> int:
    """A TCP port that is free right now on 127.0.0.1."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class ThreadedUvicorn:
    """An ASGI app served by uvicorn on 127.0.0.1 in a background thread (its own event loop):
    how the mock, scripted and garbage upstreams run next to the test process."""

    def __init__(self, app: Any, port: int, label: str, **config: Any) -> None:
        import uvicorn

        self.label = label
        self.port = port
        self.server = uvicorn.Server(
            uvicorn.Config(
                app,
                host="127.0.0.1",
                port=port,
                log_level="warning",
                lifespan="on",
                access_log=False,
                loop="asyncio",
                **config,
            )
        )
        self._thread = threading.Thread(
            target=self.server.run, name=f"{label.replace(' ', '-')}-{port}", daemon=True
        )

    def start(self, timeout: float = 15) -> None:
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"{self.label} did not start on port {self.port}")
            time.sleep(0.02)

    def stop(self) -> None:
        self.server.should_exit = True
        self._thread.join(timeout=10)


# -- mock upstream ---------------------------------------------------------------------------------


class MockUpstreamServer:
    """The bundled mock upstream served by uvicorn in a background thread (its own event loop)."""

    def __init__(self, port: int | None = None, *, arg_chunk: int = 3) -> None:
        from gateway.mock_upstream import create_app

        self.port = port or free_port()
        self.app = create_app(arg_chunk=arg_chunk)
        self.url = f"http://127.0.0.1:{self.port}"
        self._uvicorn: ThreadedUvicorn | None = None
        self.client = httpx.Client(base_url=self.url, timeout=10)

    def start(self, timeout: float = 15) -> MockUpstreamServer:
        self._uvicorn = ThreadedUvicorn(self.app, self.port, "mock upstream")
        self.app.state.server_state = self._uvicorn.server.server_state
        self._uvicorn.start(timeout)
        return self

    def stop(self) -> None:
        if self._uvicorn is not None:
            self._uvicorn.stop()
        self.client.close()

    def base_url(self, protocol: str, fault: str = "") -> str:
        """The channel base URL for a protocol; ``fault`` like ``"status=500"`` adds a fault prefix."""
        prefix = f"/fault/{fault}" if fault else ""
        return f"{self.url}{prefix}" if protocol == "gemini" else f"{self.url}{prefix}/v1"

    # introspection
    def requests(self) -> list[dict[str, Any]]:
        return self.client.get("/_mock/requests").json()

    def clear(self) -> None:
        self.client.delete("/_mock/requests").raise_for_status()

    def reset(self) -> None:
        self.client.post("/_mock/reset").raise_for_status()

    def stats(self) -> dict[str, Any]:
        return self.client.get("/_mock/stats").json()

    def image_url(self, name: str = "red.png") -> str:
        """A test image served by the mock over HTTP (see gateway/mock_upstream/wire/images.py)."""
        return f"{self.url}/_mock/images/{name}"

    def image_hits(self) -> list[str]:
        return self.client.get("/_mock/image_hits").json()

    def script(self, turns: list[dict[str, Any]]) -> None:
        self.client.post("/_mock/script", json=turns).raise_for_status()


# -- the gateway -------------------------------------------------------------------------------------


def database_url() -> str:
    """A DATABASE_URL for the database this test process is connected to (the test database)."""
    from django.db import connection

    sd = connection.settings_dict
    if connection.vendor == "sqlite":
        return "sqlite:///" + str(sd["NAME"])
    if connection.vendor == "postgresql":
        user = sd.get("USER") or "postgres"
        password = f":{sd['PASSWORD']}" if sd.get("PASSWORD") else ""
        host = sd.get("HOST") or "127.0.0.1"
        port = f":{sd['PORT']}" if sd.get("PORT") else ""
        return f"postgres://{user}{password}@{host}{port}/{sd['NAME']}"
    raise RuntimeError(f"e2e servers do not support the {connection.vendor} backend")


class GatewayServer:
    """Our production ASGI server (``uvicorn gateway.asgi:application --loop uvloop --http httptools``)
    as a subprocess on a free port; stdout and stderr go to ``log_path``."""

    def __init__(
        self,
        env: dict[str, str] | None = None,
        *,
        port: int | None = None,
        name: str = "gateway",
        workers: int = 1,
    ) -> None:
        from django.conf import settings

        self.port = port or free_port()
        self.workers = workers
        self.url = f"http://127.0.0.1:{self.port}"
        LOG_DIR.mkdir(parents=True, exist_ok=True)
        self.log_path = LOG_DIR / f"{name}-{os.getpid()}-{self.port}.log"
        base = {
            k: v
            for k, v in os.environ.items()
            if k not in ("REDIS_URL", "DATABASE_URL", "GATEWAY_TEST_DB", "PROMETHEUS_MULTIPROC_DIR")
        }
        # Prometheus multiprocess mode, as `make run`: a fresh directory per server (/metrics sums workers)
        self.metrics_dir = tempfile.mkdtemp(prefix="monogate-prom-")
        base.update(
            {
                "DJANGO_SETTINGS_MODULE": "gateway.settings",
                "DATABASE_URL": database_url(),
                "SECRET_KEY": settings.SECRET_KEY,
                "GATEWAY_CONFIG_POLL_SECONDS": "0.2",
                "PYTHONUNBUFFERED": "1",
                "LOG_LEVEL": "WARNING",
                "GATEWAY_SECURE_COOKIES": "0",  # the browser tests log in over plain http://127.0.0.1
                "PROMETHEUS_MULTIPROC_DIR": self.metrics_dir,
            }
        )
        base.update(env or {})
        self.env = {k: v for k, v in base.items() if v is not None}
        self.proc: subprocess.Popen | None = None
        self.client = httpx.Client(base_url=self.url, timeout=10)

    def start(self, timeout: float = 60) -> GatewayServer:
        # The production protocol: httptools with header/body timeouts and a connection cap.
        cmd = [
            sys.executable,
            "-m",
            "uvicorn",
            "gateway.asgi:application",
            "--loop",
            "uvloop",
            "--http",
            "gateway.serving:GuardedHttpToolsProtocol",
            "--timeout-keep-alive",
            "5",
            "--no-proxy-headers",  # as gateway.launch: X-Forwarded-For is the gateway's to read
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--lifespan",
            "on",
            "--timeout-graceful-shutdown",
            self.env.get("GATEWAY_SHUTDOWN_GRACE_SECONDS", "3"),
        ]
        if self.workers > 1:
            cmd += ["--workers", str(self.workers)]
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            cmd, cwd=ROOT, env=self.env, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True
        )
        self.wait_ready(timeout)
        return self

    def wait_ready(self, timeout: float = 60) -> None:
        """Wait until the server answers HTTP at all (any status)."""
        deadline = time.monotonic() + timeout
        while True:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"gateway exited with {self.proc.returncode}:\n{self.log_tail()}")
            try:
                self.client.get("/healthz", timeout=2)
                return
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"gateway did not answer within {timeout}s:\n{self.log_tail()}")
            time.sleep(0.1)

    def healthz(self) -> dict[str, Any]:
        response = self.client.get("/healthz", timeout=5)
        try:
            return response.json()
        except ValueError:
            return {"status_code": response.status_code, "text": response.text[:200]}

    def wait_config(self, timeout: float = 15) -> int:
        """Wait until ``/healthz`` reports the configuration version now in the database."""
        from gateway.config_version import current

        deadline = time.monotonic() + timeout
        seen: Any = None
        while True:
            # read each time: a write by the server itself (a signal on a config model) moves the
            # version again after ours, and the server is then up to date with the newer one
            expected = current()[0]
            seen = self.healthz()
            if seen.get("config_version") == expected:
                return expected
            if time.monotonic() > deadline:
                raise AssertionError(f"gateway config_version stuck at {seen!r}, database has {expected}")
            time.sleep(0.05)

    def log_size(self) -> int:
        return self.log_path.stat().st_size if self.log_path.exists() else 0

    def log_tail(self, since: int = 0, limit: int = 20000) -> str:
        if not self.log_path.exists():
            return ""
        with open(self.log_path, "rb") as fh:
            fh.seek(since)
            data = fh.read()
        return data[-limit:].decode("utf-8", "replace")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        self.client.close()
        shutil.rmtree(self.metrics_dir, ignore_errors=True)
        if getattr(self, "_log", None) is not None:
            self._log.close()


# -- configuration helpers ---------------------------------------------------------------------------


@dataclass
class Route:
    provider: Any
    channel: Any
    channel_model: Any
    upstream_key: str


def make_route(
    protocol: str,
    model: str,
    base_url: str,
    *,
    upstream_model: str = "",
    upstream_key: str | None = None,
    extra_headers: dict[str, str] | None = None,
    provider: Any = None,
    provider_name: str | None = None,
    priority: int = 0,
    weight: int = 1,
    channel_name: str | None = None,
    **provider_fields: Any,
) -> Route:
    """Create (or reuse ``provider``) a provider, one channel speaking ``protocol`` at ``base_url``,
    and a model mapping ``model`` → ``upstream_model``; bumps the config version."""
    from gateway import config_version
    from providers.models import Channel, ChannelModel, Provider

    n = next(_names)
    if provider is None:
        provider = Provider.objects.create(
            name=provider_name or f"p{n}-{protocol}-{model}", priority=priority, **provider_fields
        )
    upstream_key = upstream_key or f"sk-upstream-{protocol}-{secrets.token_hex(6)}"
    channel = Channel(
        provider=provider,
        name=channel_name or f"c{n}-{protocol}",
        protocol=protocol,
        base_url=base_url,
        weight=weight,
        extra_headers=extra_headers,
    )
    channel.set_api_key(upstream_key)
    channel.save()
    channel_model = ChannelModel.objects.create(channel=channel, model=model, upstream_model=upstream_model)
    config_version.bump()
    return Route(provider, channel, channel_model, upstream_key)


def make_key(name: str = "e2e", *, allowed_models: list[str] | None = None, **fields: Any) -> tuple[Any, str]:
    """Create an enabled API key; returns (ApiKey, secret)."""
    from gateway import config_version
    from keys.models import ApiKey

    key = ApiKey(name=f"{name}-{next(_names)}", allowed_models=allowed_models, **fields)
    secret = key.set_secret()
    key.save()
    config_version.bump()
    return key, secret
