"""Install the pinned agent CLIs once (npm, into a cache folder) and run them against the gateway.

The versions are pinned in ``package.json`` beside this file. They are installed into
``$GATEWAY_AGENTS_NODE_DIR`` (default ``data/agents-node/``, gitignored) and reused as long as that
folder's ``package.json`` matches ours; a file lock serialises concurrent installs. When node/npm
is missing or the registry says no, ``ensure_installed()`` returns a precise reason instead of a
path, and the tests skip with it.

Each run gets a fresh temporary working folder and a fresh home (``HOME``, ``CODEX_HOME``), and
an environment stripped of any real OpenAI/Anthropic credentials or base URLs, so the CLI talks
to nothing but the gateway.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.servers import ROOT

HERE = Path(__file__).resolve().parent
PACKAGE_JSON = HERE / "package.json"
INSTALL_TIMEOUT = 900
RUN_TIMEOUT = 90

BINARIES = {"codex": "codex", "claude": "claude", "gemini": "gemini"}
_STRIPPED_PREFIXES = ("OPENAI_", "ANTHROPIC_", "CODEX_", "CLAUDE_", "AWS_", "GOOGLE_", "VERTEX_")


def node_dir() -> Path:
    return Path(os.environ.get("GATEWAY_AGENTS_NODE_DIR") or ROOT / "data" / "agents-node")


def ensure_installed() -> tuple[dict[str, Path] | None, str]:
    """``({"codex": path, "claude": path, "gemini": path}, "")`` once installed, or ``(None, reason)``."""
    npm = shutil.which("npm")
    if shutil.which("node") is None or npm is None:
        return None, "node and npm are not installed (the agent CLIs install from the npm registry)"
    folder = node_dir()
    folder.mkdir(parents=True, exist_ok=True)
    wanted = PACKAGE_JSON.read_bytes()
    with open(folder / ".install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        paths = {name: folder / "node_modules" / ".bin" / binary for name, binary in BINARIES.items()}
        manifest = folder / "package.json"
        if manifest.exists() and manifest.read_bytes() == wanted and all(p.exists() for p in paths.values()):
            return paths, ""
        manifest.write_bytes(wanted)
        try:
            done = subprocess.run(
                [npm, "install", "--no-audit", "--no-fund", "--loglevel=error"],
                cwd=folder,
                capture_output=True,
                text=True,
                timeout=INSTALL_TIMEOUT,
            )
        except subprocess.TimeoutExpired:
            manifest.unlink(missing_ok=True)
            return None, f"npm install of the agent CLIs did not finish within {INSTALL_TIMEOUT}s"
        if done.returncode != 0:
            manifest.unlink(missing_ok=True)
            return None, f"npm install of the agent CLIs failed (exit {done.returncode}): {_npm_error(done)}"
        missing = [str(p) for p in paths.values() if not p.exists()]
        if missing:
            manifest.unlink(missing_ok=True)
            return None, f"npm install finished but these CLIs are missing: {', '.join(missing)}"
        return paths, ""


def _npm_error(done: subprocess.CompletedProcess) -> str:
    """npm's own explanation (its ``npm error`` lines, without the stack and the log path)."""
    lines = [
        line.removeprefix("npm error").strip()
        for line in (done.stderr or done.stdout).splitlines()
        if line.startswith("npm error") and "complete log" not in line
    ]
    lines = [line for line in lines if line and not line.startswith("at ")]
    return " | ".join(lines[:6])[:800] or (done.stderr or done.stdout).strip()[-800:]


def clean_env(home: Path, extra: dict[str, str]) -> dict[str, str]:
    """The machine's environment without provider credentials, with a private HOME."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(_STRIPPED_PREFIXES)
        and k not in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY")
    }
    env.update(
        {
            "HOME": str(home),
            "XDG_CONFIG_HOME": str(home / ".config"),
            "NO_COLOR": "1",
            "TERM": "dumb",
            "NO_PROXY": "127.0.0.1,localhost",
            "no_proxy": "127.0.0.1,localhost",
        }
    )
    env.update(extra)
    return env


@dataclass
class AgentRun:
    returncode: int
    stdout: str
    stderr: str
    workdir: Path

    def describe(self) -> str:
        return (
            f"exit {self.returncode}\n--- stdout ---\n{self.stdout[-6000:]}\n"
            f"--- stderr ---\n{self.stderr[-4000:]}"
        )


def run(cmd: list[str], *, workdir: Path, env: dict[str, str], timeout: float = RUN_TIMEOUT) -> AgentRun:
    """Run a CLI to completion (stdin closed); a timeout is reported as exit -9 with its output."""
    try:
        done = subprocess.run(
            cmd,
            cwd=workdir,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else exc.stdout or ""
        err = exc.stderr.decode() if isinstance(exc.stderr, bytes) else exc.stderr or ""
        return AgentRun(-9, out, f"{err}\n[timed out after {timeout}s]", workdir)
    return AgentRun(done.returncode, done.stdout, done.stderr, workdir)


CODEX_CONFIG = """\
model = "{model}"
model_provider = "gateway"
approval_policy = "never"
sandbox_mode = "danger-full-access"

[model_providers.gateway]
name = "Monoize gateway"
base_url = "{base_url}"
wire_api = "responses"
{auth}
request_max_retries = 0
stream_max_retries = 0
{extra}"""
ENV_KEY_AUTH = 'env_key = "GATEWAY_API_KEY"'
# Command-backed auth: Codex then fetches ``GET {base_url}/models?client_version=...`` (an
# ``env_key`` provider never does; codex-rs/models-manager/src/manager.rs ``should_refresh_models``).
COMMAND_AUTH = 'auth = { command = "printenv", args = ["GATEWAY_API_KEY"] }'


def run_codex(
    binary: Path,
    *,
    base_url: str,
    api_key: str,
    model: str,
    prompt: str,
    tmp: Path,
    auth: str = ENV_KEY_AUTH,
    provider_extra: str = "",
) -> AgentRun:
    """``codex exec`` in ``tmp/work`` with ``CODEX_HOME=tmp/codex-home`` holding the provider config;
    ``auth`` is the provider's auth line, ``provider_extra`` more provider settings (TOML lines)."""
    workdir, home = tmp / "work", tmp / "home"
    codex_home = home / ".codex"
    for folder in (workdir, codex_home):
        folder.mkdir(parents=True, exist_ok=True)
    (codex_home / "config.toml").write_text(
        CODEX_CONFIG.format(model=model, base_url=base_url, auth=auth, extra=provider_extra)
    )
    env = clean_env(home, {"CODEX_HOME": str(codex_home), "GATEWAY_API_KEY": api_key, "RUST_LOG": "error"})
    cmd = [
        str(binary),
        "exec",
        "--skip-git-repo-check",
        "--dangerously-bypass-approvals-and-sandbox",
        "--json",
        "--color",
        "never",
        "--ephemeral",
        "-C",
        str(workdir),
        prompt,
    ]
    return run(cmd, workdir=workdir, env=env)


def run_claude(
    binary: Path,
    *,
    base_url: str,
    api_key: str,
    model: str,
    small_model: str,
    prompt: str,
    tmp: Path,
    auth: str,
) -> AgentRun:
    """``claude -p`` in ``tmp/work``; ``auth`` is ``"x-api-key"`` (ANTHROPIC_API_KEY) or ``"bearer"``
    (ANTHROPIC_AUTH_TOKEN)."""
    workdir, home = tmp / "work", tmp / "home"
    for folder in (workdir, home):
        folder.mkdir(parents=True, exist_ok=True)
    credential = {"ANTHROPIC_API_KEY": api_key} if auth == "x-api-key" else {"ANTHROPIC_AUTH_TOKEN": api_key}
    env = clean_env(
        home,
        {
            "ANTHROPIC_BASE_URL": base_url,
            **credential,
            "ANTHROPIC_MODEL": model,
            "ANTHROPIC_DEFAULT_HAIKU_MODEL": small_model,
            "ANTHROPIC_SMALL_FAST_MODEL": small_model,
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_ERROR_REPORTING": "1",
            "CLAUDE_CODE_MAX_RETRIES": "0",
            "API_TIMEOUT_MS": "60000",
        },
    )
    cmd = [
        str(binary),
        "-p",
        prompt,
        "--output-format",
        "json",
        "--permission-mode",
        "acceptEdits",
        "--allowedTools",
        "Write",
        "--model",
        model,
    ]
    return run(cmd, workdir=workdir, env=env)


GEMINI_SETTINGS = {
    # Without this the CLI picks another auth type and refuses it in -p mode.
    "security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": False}},
    # Usage statistics, telemetry and update checks would look up Google hosts.
    "privacy": {"usageStatisticsEnabled": False},
    "telemetry": {"enabled": False},
    "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
}


def run_gemini(binary: Path, *, base_url: str, api_key: str, model: str, prompt: str, tmp: Path) -> AgentRun:
    """``gemini -p`` in ``tmp/work`` with a private ``~/.gemini/settings.json`` (issue 19: what
    version 0.61.0 needs to run offline and non-interactively). ``-m`` skips the routing model;
    the key goes out as ``x-goog-api-key``."""
    import json

    workdir, home = tmp / "work", tmp / "home"
    for folder in (workdir, home / ".gemini"):
        folder.mkdir(parents=True, exist_ok=True)
    (home / ".gemini" / "settings.json").write_text(json.dumps(GEMINI_SETTINGS))
    env = clean_env(
        home,
        {
            "GOOGLE_GEMINI_BASE_URL": base_url,
            "GEMINI_API_KEY": api_key,
            "GEMINI_CLI_TRUST_WORKSPACE": "true",
            "GEMINI_TELEMETRY_ENABLED": "false",
        },
    )
    cmd = [str(binary), "-p", prompt, "-m", model, "--approval-mode", "auto_edit", "--output-format", "json"]
    return run(cmd, workdir=workdir, env=env)
