"""``make run`` as a newcomer types it: on a copy of the tracked files (its own ``data/``), it
migrates, loads the demo configuration, starts the mock upstream and the gateway, and the demo
key's first request gets an answer offline (the gateway does not listen before the mock does: a
request in between failed, and a second opened the demo channel's breaker for a minute);
stopping it stops the mock too. A comment line inside the recipe's
continued shell command once made the shell refuse the whole command, and nothing noticed for
days: every other test starts the gateway its own way."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from tests.servers import free_port

ROOT = Path(__file__).resolve().parents[2]


def _tracked_copy(dest: Path) -> None:
    """The tracked files, mtimes kept (so make finds the venv's install stamp newer than
    pyproject.toml and installs nothing); the venv itself is shared by a link."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    for name in filter(None, listed.decode().split("\0")):
        src = ROOT / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    (dest / ".venv").symlink_to(ROOT / ".venv")


def _closed(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


def test_make_run_serves_the_demo_offline_and_stops_cleanly(tmp_path):
    if shutil.which("make") is None or shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs make and a git checkout")
    tree = tmp_path / "tree"
    _tracked_copy(tree)
    port, mock_port = free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GATEWAY_", "DJANGO_", "DATABASE_URL"))}
    env.pop("REDIS_URL", None)  # the embedded default: SQLite, no Redis
    log = (tmp_path / "run.log").open("wb")
    # -o: the venv and its install stamp are the shared ones; make must not rebuild them here
    proc = subprocess.Popen(
        [
            "make",
            "-o",
            ".venv/.installed",
            "-o",
            ".venv/bin/python",
            "run",
            f"PORT={port}",
            f"MOCK_PORT={mock_port}",
        ],
        cwd=tree,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        answer = None
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                answer = httpx.post(
                    f"http://127.0.0.1:{port}/v1/chat/completions",
                    headers={"Authorization": "Bearer sk-demo-0001"},
                    json={"model": "demo-chat", "messages": [{"role": "user", "content": "hi"}]},
                    timeout=5,
                )
                break  # the first answer: the mock listens before the gateway starts
            except httpx.TransportError:
                pass
            time.sleep(0.5)
        output = (tmp_path / "run.log").read_text(errors="replace")
        assert answer is not None, f"make run did not serve (exit {proc.poll()}):\n{output[-3000:]}"
        assert answer.status_code == 200, answer.text
        assert answer.json()["choices"][0]["message"]["content"] == "Echo: hi"
        assert "Demo API key:  sk-demo-0001" in output
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C in the terminal
            try:
                proc.wait(timeout=45)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        log.close()
        pid_file = tree / "data" / "mock.pid"  # a make that failed before its trap leaves the mock
        if pid_file.exists():
            try:
                os.kill(int(pid_file.read_text().strip()), signal.SIGTERM)
            except (ValueError, ProcessLookupError):
                pass
    deadline = time.monotonic() + 10
    while not (_closed(port) and _closed(mock_port)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _closed(port) and _closed(mock_port), "the gateway or the mock upstream outlived make run"
