"""Making sure the external tools exist: nginx and wrk from Debian, LiteLLM in its own venv, the
Portkey gateway from npm in ``bench/.portkey``, py-spy (a dev tool, never a runtime dependency) in
the project venv, and redis-server (Debian) for the per-key limits case with Redis.

``make bench`` must work from a fresh clone, so every missing piece is installed here; we run
as root on the bench machines, so ``apt-get`` works directly.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent
LITELLM_VENV = BENCH / ".venv-litellm"
# Pinned on purpose: litellm had PyPI releases that shipped credential stealers (1.82.7/1.82.8 in
# March 2026, and a later one that PyPI no longer serves). This release predates the later one
# and has stayed on PyPI; bump it deliberately, not by resolving "latest".
LITELLM_REQUIREMENT = "litellm[proxy]==1.106.12"
# The Portkey gateway (``@portkey-ai/gateway``): bench/portkey/package.json pins the version and its
# package-lock.json every transitive package; ``npm ci`` installs exactly that into bench/.portkey,
# without install scripts (the package's only one is a patch-package run with no patches shipped).
PORTKEY_VERSION = "1.15.2"
PORTKEY_SPEC = BENCH / "portkey"
PORTKEY_DIR = BENCH / ".portkey"
PORTKEY_START = PORTKEY_DIR / "node_modules" / "@portkey-ai" / "gateway" / "build" / "start-server.js"


def _run(cmd: list[str], **kw) -> None:
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, **kw)


def ensure_apt_tools() -> None:
    """nginx (``nginx-light`` is enough: ``return`` and keep-alive are core), wrk, and redis-server
    (a private instance backs the per-key limits case; the gateway itself runs without Redis)."""
    missing = [
        pkg
        for binary, pkg in (("nginx", "nginx-light"), ("wrk", "wrk"), ("redis-server", "redis-server"))
        if shutil.which(binary) is None and not Path(f"/usr/sbin/{binary}").exists()
    ]
    if not missing:
        return
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    _run(["apt-get", "update", "-qq"], env=env)
    _run(["apt-get", "install", "-y", "-qq", *missing], env=env)


def nginx_binary() -> str:
    return shutil.which("nginx") or "/usr/sbin/nginx"


def ensure_litellm() -> Path:
    """Create ``bench/.venv-litellm`` with the pinned LiteLLM proxy when it is missing."""
    exe = LITELLM_VENV / "bin" / "litellm"
    if exe.exists():
        return exe
    python = shutil.which("python3.11") or sys.executable
    _run([python, "-m", "venv", str(LITELLM_VENV)])
    _run([str(LITELLM_VENV / "bin" / "pip"), "install", "-q", LITELLM_REQUIREMENT])
    return exe


def ensure_portkey() -> Path:
    """``bench/.portkey`` with the pinned Portkey gateway (``npm ci`` from the committed lock) when
    it is missing or was installed from another lock; needs ``node`` and ``npm`` (Debian's
    ``nodejs`` and ``npm``)."""
    installed = PORTKEY_DIR / "package-lock.json"
    if (
        portkey_version() == PORTKEY_VERSION
        and installed.exists()
        and installed.read_bytes() == (PORTKEY_SPEC / "package-lock.json").read_bytes()
    ):
        return PORTKEY_START
    if shutil.which("npm") is None:
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        _run(["apt-get", "update", "-qq"], env=env)
        _run(["apt-get", "install", "-y", "-qq", "nodejs", "npm"], env=env)
    PORTKEY_DIR.mkdir(parents=True, exist_ok=True)
    for name in ("package.json", "package-lock.json"):
        shutil.copyfile(PORTKEY_SPEC / name, PORTKEY_DIR / name)
    _run(["npm", "ci", "--prefix", str(PORTKEY_DIR), "--ignore-scripts", "--no-audit", "--no-fund"])
    return PORTKEY_START


def portkey_version() -> str:
    import json

    try:
        return json.loads((PORTKEY_START.parent.parent / "package.json").read_text())["version"]
    except (OSError, ValueError, KeyError):
        return ""


def node_version() -> str:
    out = (
        subprocess.run(["node", "--version"], capture_output=True, text=True)
        if shutil.which("node")
        else None
    )
    return out.stdout.strip() if out else "missing"


def litellm_version() -> str:
    out = subprocess.run(
        [
            str(LITELLM_VENV / "bin" / "python"),
            "-c",
            "import importlib.metadata as m; print(m.version('litellm'))",
        ],
        capture_output=True,
        text=True,
    )
    return out.stdout.strip() or "unknown"


def ensure_pyspy() -> str | None:
    """py-spy into the project venv as a dev tool (not in pyproject's runtime dependencies)."""
    exe = Path(sys.executable).parent / "py-spy"
    if exe.exists():
        return str(exe)
    try:
        _run([sys.executable, "-m", "pip", "install", "-q", "py-spy"])
    except subprocess.CalledProcessError:
        return None
    return str(exe) if exe.exists() else None
