"""Process helpers: free ports, waiting for a listener, stopping what we started, and reading
resident memory from /proc (no psutil in the project venv)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, proc: subprocess.Popen | None, name: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise SystemExit(f"{name} exited with {proc.returncode} before listening on {port}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.2)
    raise SystemExit(f"{name} did not listen on {port} within {timeout:.0f}s")


def stop(proc: subprocess.Popen | None, timeout: float = 15) -> None:
    """SIGTERM the process we started (its own process group when it has one), then SIGKILL."""
    if proc is None or proc.poll() is not None:
        return
    try:
        pgid = os.getpgid(proc.pid)
        target = (
            (lambda sig: os.killpg(pgid, sig)) if pgid == proc.pid else (lambda sig: proc.send_signal(sig))
        )
        target(signal.SIGTERM)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            target(signal.SIGKILL)
            proc.wait(timeout=5)
    except ProcessLookupError:
        pass


def children(pid: int) -> list[int]:
    """Direct children, from /proc/<pid>/task/*/children."""
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            out += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
    return out


def rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def pss_mb(pid: int) -> float:
    """Proportional set size: RSS with each shared page (the extension modules and libraries every
    worker maps, the page cache holds once) divided among the processes that map it."""
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def worker_pids(master: int) -> list[int]:
    """Server worker processes under a master (uvicorn --workers N spawns them with
    multiprocessing; the resource tracker, when present, is left out)."""
    return [c for c in children(master) if "resource_tracker" not in cmdline(c)]


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process, from /proc/<pid>/stat."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def thread_cpu(pids: list[int]) -> tuple[float, float]:
    """(main threads' CPU seconds, other threads' CPU seconds) of the worker processes: the
    event loops, and the threads beside them (the capture and request-log writers)."""
    main = other = 0.0
    for pid in pids:
        for task in Path(f"/proc/{pid}/task").glob("*"):
            try:
                fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            seconds = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
            if int(task.name) == pid:
                main += seconds
            else:
                other += seconds
    return main, other


def wait_quiet(pids: list[int], *, busy: float = 0.05, window: float = 0.5, timeout: float = 180) -> float:
    """Wait until the processes together use less than ``busy`` of a core over ``window``
    seconds (a background writer has drained its backlog); returns how long that took."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        before = sum(cpu_seconds(p) for p in pids)
        time.sleep(window)
        if sum(cpu_seconds(p) for p in pids) - before < busy * window:
            break
    return max(0.0, time.monotonic() - start - window)
