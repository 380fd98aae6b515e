"""Starting the systems under test: the gateway (the production way), LiteLLM's proxy and the
Portkey gateway.

Gateway: a throwaway data directory with its own SQLite database (the documented single-machine
set-up, no Redis), configured with ``manage.py loadconfig`` like an operator would, served by
uvicorn with uvloop and httptools, ``--workers 2`` (one per core), no access log.

LiteLLM: its own venv (``bench/.venv-litellm``), ``openai/``-prefixed models with ``api_base``
pointing at the same upstreams, a master key (the gateway authenticates too), two workers, and
the local model-cost map (no network at start-up). It gets a minimal environment: nothing of
ours leaks into a third-party process.

Portkey: ``@portkey-ai/gateway`` from npm in ``bench/.portkey`` (pinned, see ``tools.py``), run as
its README says: ``NODE_ENV=production node …/build/start-server.js --port=N --headless``. One
Node process (one event loop; it has no worker option). It is configured per request: the
headers ``x-portkey-provider`` and ``x-portkey-custom-host`` point it at the same nginx or paced
SSE server, and the upstream key rides in the client's own auth header (Portkey's open-source
gateway authenticates nobody; the gateway and LiteLLM check a key on every request).

Variants of the gateway (request logs off, Redis for the per-key limits) are further ``Gateway``
instances with their own data directory, port and ``GATEWAY_*`` environment.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from .procs import wait_port, worker_pids
from .tools import LITELLM_VENV, PORTKEY_START

ROOT = Path(__file__).resolve().parent.parent.parent

PLAIN_KEY = "sk-bench-plain-0001"
CAPTURE_KEY = "sk-bench-capture-0001"
LIMITS_KEY = "sk-bench-limits-0001"
# Limits far above anything the bench sends (a 5 s run at 64 connections is < 100k requests), so
# the limited key is never refused and the case measures only admission and settlement.
NEVER_REFUSING_LIMITS = {"rpm": 100_000_000, "tpm": 100_000_000_000, "concurrency": 100_000}
LITELLM_KEY = "sk-litellm-bench-0001"
UPSTREAM_KEY = "sk-upstream-bench"

FIVE_RULES = [
    {
        "transform": "prompt_inject_system",
        "phase": "request",
        "models": ["*"],
        "config": {"content": "Answer briefly.", "position": "append"},
    },
    {"transform": "role_merge_consecutive", "phase": "request", "models": ["*"], "config": {}},
    {
        "transform": "field_strip_sampling",
        "phase": "request",
        "models": ["*"],
        "config": {"fields": ["temperature", "top_p"]},
    },
    {
        "transform": "prompt_append_empty_user",
        "phase": "request",
        "models": ["*"],
        "config": {"content": " "},
    },
    {"transform": "role_developer_to_system", "phase": "request", "models": ["*"], "config": {}},
]

# A Codex deployment in front of a Chat upstream: the freeform apply_patch tool as a function.
CUSTOM_TOOLS_TO_FUNCTION = [
    {
        "transform": "field_custom_tools_to_function",
        "phase": phase,
        "models": ["*"],
        "config": {"names": ["*"]},
    }
    for phase in ("request", "response")
]


# Issue 15: the seven cache transforms, each limited to a model glob no bench model matches, so
# the rule engine must skip them on a glob miss (the hot-path cost being measured).
CACHE_TRANSFORMS = (
    "cache_anthropic_auto",
    "cache_anthropic_system",
    "cache_anthropic_tool_use",
    "cache_openai_prompt",
    "cache_openai_tool_use",
    "cache_prefix_stabilize",
    "cache_user_id",
)
CACHE_MISS_RULES = [
    {"transform": name, "phase": "request", "models": ["no-such-model-*"], "config": {}}
    for name in CACHE_TRANSFORMS
]


@dataclass
class Upstreams:
    nginx_port: int
    paced_port: int
    many_port: int = 0  # the long paced streams of harness.many_streams (provider bench-stream-many)


def _provider(
    name: str, protocol: str, base_url: str, transforms: list | None = None, **extra: object
) -> dict:
    return {
        "name": name,
        "priority": 0,
        "transforms": transforms or [],
        **extra,
        "channels": [
            {
                "name": "main",
                "protocol": protocol,
                "base_url": base_url,
                "api_key": UPSTREAM_KEY,
                "weight": 1,
                "models": [{"model": name}],
            }
        ],
    }


def gateway_config(up: Upstreams, *, capture: bool) -> dict:
    nginx = f"http://127.0.0.1:{up.nginx_port}/v1"
    return {
        "providers": [
            _provider("bench-chat", "chat_completion", nginx),
            _provider("bench-responses", "responses", nginx),
            _provider("bench-messages", "messages", nginx),
            _provider("bench-chain", "chat_completion", nginx, FIVE_RULES),
            _provider("bench-codex-chat", "chat_completion", nginx, CUSTOM_TOOLS_TO_FUNCTION),
            _provider("bench-stream", "chat_completion", f"http://127.0.0.1:{up.paced_port}/v1"),
            # issue 15: the chain plus seven cache rules whose globs miss; affinity said off / on
            _provider("bench-chain-cache", "chat_completion", nginx, FIVE_RULES + CACHE_MISS_RULES),
            _provider("bench-affinity-off", "chat_completion", nginx, affinity_mode="off"),
            _provider("bench-affinity-sticky", "chat_completion", nginx, affinity_mode="sticky"),
            *(
                [_provider("bench-stream-many", "chat_completion", f"http://127.0.0.1:{up.many_port}/v1")]
                if up.many_port
                else []
            ),
        ],
        "global_transforms": [],
        "api_keys": [
            {
                "name": "bench-plain",
                "key": PLAIN_KEY,
                "capture": "off",
                "allowed_models": ["*"],
                "transforms": [],
            },
            {
                "name": "bench-capture",
                "key": CAPTURE_KEY,
                "capture": "all",
                "allowed_models": ["*"],
                "transforms": [],
            },
            {
                "name": "bench-limits",
                "key": LIMITS_KEY,
                "capture": "off",
                "allowed_models": ["*"],
                "transforms": [],
                "limits": NEVER_REFUSING_LIMITS,
            },
        ],
        "settings": {"capture_enabled": capture},
    }


SERVERS = ("reuseport", "uvicorn", "granian")


def gc_pauses(probe_dir: Path, start: float, end: float) -> list[tuple[int, float]]:
    """(generation, pause in ms) of every collection the probed workers (``Gateway.probe_gc``)
    ran between ``start`` and ``end`` (unix time). Waits first: each worker writes its last
    minute of collections once a second."""
    time.sleep(1.5)
    return [
        (gen, ms)
        for path in probe_dir.glob("gc-*.json")
        for at, gen, ms in json.loads(path.read_bytes())
        if start <= at <= end
    ]


class Gateway:
    """``server``: ``reuseport`` (``gateway.launch``: uvicorn workers, one SO_REUSEPORT socket
    each; what ``make run`` uses), ``uvicorn`` (``uvicorn --workers``, one shared socket) or
    ``granian`` (its ASGI interface; only where ``bench/server_choice.py`` installed it).
    ``name``/``env``: a variant of the gateway (its own data directory and environment)."""

    def __init__(
        self,
        workdir: Path,
        port: int,
        workers: int = 2,
        app: str = "gateway.asgi:application",
        name: str = "gateway-data",
        env: dict[str, str] | None = None,
        server: str = "reuseport",
    ) -> None:
        self.app = app
        self.server = server
        self.workdir = workdir / name
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = port
        self.workers = workers
        self.proc: subprocess.Popen | None = None
        self.env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "gateway.settings",
            "GATEWAY_DATA_DIR": str(self.workdir),
            "DATABASE_URL": f"sqlite:///{self.workdir / 'bench.sqlite3'}",
            "SECRET_KEY": secrets.token_urlsafe(40),
            "LOG_LEVEL": "WARNING",
            "GATEWAY_LOG_LEVEL": "WARNING",
        }
        for var in ("REDIS_URL", "PYTHONTRACEMALLOC", "PYTHONDEVMODE"):
            self.env.pop(var, None)
        self.env.update(env or {})

    def probe_gc(self, probe_dir: Path) -> None:
        """Serve ``harness.gc_probe`` instead of the plain app: the same gateway, every garbage
        collection of every worker timed into ``probe_dir`` (read back with ``gc_pauses``)."""
        probe_dir.mkdir(parents=True, exist_ok=True)
        self.app = "harness.gc_probe:application"
        self.env["PYTHONPATH"] = f"{ROOT / 'bench'}:{ROOT}"
        self.env["GC_PROBE_DIR"] = str(probe_dir)

    def pids(self) -> list[int]:
        """The processes that serve requests (the uvicorn workers, not the master)."""
        return worker_pids(self.proc.pid) if self.proc is not None else []

    def manage(self, *args: str) -> None:
        subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=ROOT,
            env=self.env,
            check=True,
            stdout=subprocess.DEVNULL,
        )

    def configure(self, up: Upstreams, *, capture: bool) -> None:
        path = self.workdir / f"config-capture-{int(capture)}.json"
        path.write_text(json.dumps(gateway_config(up, capture=capture), indent=1))
        self.manage("loadconfig", str(path))

    def prepare(self, up: Upstreams) -> None:
        self.manage("migrate", "--noinput", "-v", "0")
        self.configure(up, capture=False)

    def command(self) -> list[str]:
        if self.server == "reuseport":
            return [
                sys.executable,
                "-m",
                "gateway.launch",
                "--app",
                self.app,
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--workers",
                str(self.workers),
                # no --http: the launcher's default, the guarded httptools protocol make run serves
                "--log-level",
                "warning",
            ]
        if self.server == "granian":
            return [
                sys.executable,
                "-m",
                "granian",
                "--interface",
                "asgi",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--workers",
                str(self.workers),
                "--loop",
                "uvloop",
                "--http",
                "1",
                "--no-ws",
                "--log-level",
                "warning",
                "--no-access-log",
                self.app,
            ]
        return [
            str(Path(sys.executable).parent / "uvicorn"),
            self.app,
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--workers",
            str(self.workers),
            "--loop",
            "uvloop",
            "--http",
            "httptools",
            "--no-access-log",
            "--lifespan",
            "on",
            "--log-level",
            "warning",
        ]

    def start(self) -> None:
        log = (self.workdir / "uvicorn.log").open("wb")
        self.proc = subprocess.Popen(
            self.command(),
            cwd=ROOT,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        wait_port(self.port, self.proc, "gateway")
        # gateway.launch runs the transform checks in a short-lived child beside the workers: wait
        # for it to be gone, so that only workers are measured.
        deadline = time.monotonic() + 60
        while (
            self.server == "reuseport"
            and len(worker_pids(self.proc.pid)) > self.workers
            and time.monotonic() < deadline
        ):
            time.sleep(0.5)
        time.sleep(2)  # both workers up and their snapshots loaded


def litellm_config(up: Upstreams) -> dict:
    def model(name: str, port: int) -> dict:
        return {
            "model_name": name,
            "litellm_params": {
                "model": "openai/bench-model",
                "api_base": f"http://127.0.0.1:{port}/v1",
                "api_key": UPSTREAM_KEY,
            },
        }

    return {
        "model_list": [model("bench-chat", up.nginx_port), model("bench-stream", up.paced_port)],
        "litellm_settings": {"drop_params": True, "telemetry": False, "json_logs": False},
        "general_settings": {"master_key": LITELLM_KEY},
    }


class LiteLLM:
    def __init__(self, workdir: Path, port: int, workers: int = 2) -> None:
        self.workdir = workdir / "litellm"
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = port
        self.workers = workers
        self.proc: subprocess.Popen | None = None

    def pids(self) -> list[int]:
        return worker_pids(self.proc.pid) if self.proc is not None else []

    def start(self, up: Upstreams) -> None:
        cfg = self.workdir / "config.yaml"
        cfg.write_text(json.dumps(litellm_config(up), indent=1))  # JSON is YAML
        env = {
            "PATH": f"{LITELLM_VENV / 'bin'}:/usr/local/bin:/usr/bin:/bin",
            "HOME": str(self.workdir),
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "LITELLM_LOG": "ERROR",
            "LITELLM_MODE": "PRODUCTION",
            "LITELLM_TELEMETRY": "False",
            "ANONYMIZED_TELEMETRY": "False",
            "NO_DOCS": "True",
        }
        cmd = [
            str(LITELLM_VENV / "bin" / "litellm"),
            "--config",
            str(cfg),
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--num_workers",
            str(self.workers),
        ]
        log = (self.workdir / "litellm.log").open("wb")
        self.proc = subprocess.Popen(
            cmd, cwd=self.workdir, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        wait_port(self.port, self.proc, "litellm", timeout=240)
        time.sleep(3)


def portkey_headers(upstream_port: int, provider: str = "openai") -> dict[str, str]:
    """What routes a Portkey request: the provider's wire format and the upstream base URL, with
    the upstream key in that provider's own auth header."""
    auth = (
        {"x-api-key": UPSTREAM_KEY}
        if provider == "anthropic"
        else {"authorization": f"Bearer {UPSTREAM_KEY}"}
    )
    return {
        "x-portkey-provider": provider,
        "x-portkey-custom-host": f"http://127.0.0.1:{upstream_port}/v1",
        **auth,
    }


class Portkey:
    """One ``node`` process: it is its own server (no workers), so its CPU and RSS are its own."""

    def __init__(self, workdir: Path, port: int) -> None:
        self.workdir = workdir / "portkey"
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = port
        self.proc: subprocess.Popen | None = None

    def pids(self) -> list[int]:
        return [self.proc.pid] if self.proc is not None and self.proc.poll() is None else []

    def start(self) -> None:
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(self.workdir), "NODE_ENV": "production"}
        cmd = [
            "node",
            str(PORTKEY_START.relative_to(PORTKEY_START.parents[4])),
            f"--port={self.port}",
            "--headless",
        ]
        log = (self.workdir / "portkey.log").open("wb")
        self.proc = subprocess.Popen(
            cmd,
            cwd=PORTKEY_START.parents[4],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        wait_port(self.port, self.proc, "portkey", timeout=60)
        time.sleep(1)


class Redis:
    """A private, throwaway redis-server (no persistence) for the gateway variant that keeps its
    per-key limit counters in Redis."""

    def __init__(self, workdir: Path, port: int) -> None:
        self.workdir = workdir / "redis"
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = port
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        cmd = [
            "redis-server",
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(self.workdir),
        ]
        log = (self.workdir / "redis.log").open("wb")
        self.proc = subprocess.Popen(
            cmd,
            env={"PATH": "/usr/local/bin:/usr/bin:/bin:/usr/sbin"},
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        wait_port(self.port, self.proc, "redis-server", timeout=30)
