"""py-spy on one gateway worker while load runs: the top frames by own time and by inclusive
time, from py-spy's collapsed-stack ("raw") output."""

from __future__ import annotations

import subprocess
from collections import Counter
from pathlib import Path


def record(pyspy: str, pid: int, seconds: int, out: Path) -> subprocess.Popen:
    """Start sampling now (returns at once); wait on the returned process for the file."""
    return subprocess.Popen(
        [
            pyspy,
            "record",
            "--pid",
            str(pid),
            "--duration",
            str(seconds),
            "--rate",
            "250",
            "--format",
            "raw",
            "--nonblocking",
            "--output",
            str(out),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )


def _short(frame: str) -> str:
    """``func (path/to/module.py:123)`` -> ``func (module.py)`` with the package folder kept."""
    name, _, where = frame.partition(" (")
    where = where.rstrip(")")
    path = where.rsplit(":", 1)[0]
    parts = path.split("/")
    for anchor in ("site-packages", "lib", "main"):
        if anchor in parts:
            parts = parts[len(parts) - parts[::-1].index(anchor) :]
            break
    return f"{name} ({'/'.join(parts[-3:])})"


COMPONENTS = (  # (start of the frame's file path as py-spy prints it, component), first match wins
    ("gateway/proxy/", "gateway.proxy"),
    ("gateway/protocols/", "gateway.protocols"),
    ("gateway/urp/", "gateway.urp"),
    ("transforms/", "transforms"),
    ("keys/", "keys"),
    ("captures/", "captures"),
    ("providers/", "providers"),
    ("gateway/", "gateway (other)"),
    ("aiohttp/", "aiohttp (upstream client)"),
    ("yarl/", "aiohttp (upstream client)"),
    ("multidict/", "aiohttp (upstream client)"),
    ("uvicorn/", "uvicorn + httptools"),
    ("django/", "django"),
    ("asyncio/", "event loop (uvloop/asyncio)"),
    ("uvloop/", "event loop (uvloop/asyncio)"),
    ("orjson", "orjson"),
)
ROOT_FRAMES = (
    "multiprocessing/",
    "uvicorn/_subprocess.py",
    "uvicorn/supervisors/",
    "uvicorn/server.py",
    "uvicorn/_compat.py",
    "asyncio/runners.py",
    "<string>",
    "threading.py",
)


def component(frame: str) -> str:
    path = frame.partition(" (")[2]
    for needle, name in COMPONENTS:
        if path.startswith(needle) or "/" + needle in path:
            return name
    return "Python stdlib / interpreter"


def top_frames(
    raw: Path, n: int = 15
) -> tuple[int, list[tuple[str, float]], list[tuple[str, float]], list[tuple[str, float]]]:
    """(samples, [(frame, % own)], [(frame, % inclusive, start-up chain left out)],
    [(component, % own)])."""
    own: Counter[str] = Counter()
    incl: Counter[str] = Counter()
    comp: Counter[str] = Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        c = int(count)
        raw_frames = [f for f in stack.split(";") if f and not f.startswith(("process ", "thread "))]
        if not raw_frames:
            continue
        total += c
        comp[component(raw_frames[-1])] += c
        frames = [_short(f) for f in raw_frames]
        own[frames[-1]] += c
        for f, r in set(zip(frames, raw_frames, strict=True)):
            if not any(root in r for root in ROOT_FRAMES):
                incl[f] += c
    if not total:
        return 0, [], [], []
    pct = [(f, 100 * c / total) for f, c in own.most_common(n)]
    return (
        total,
        pct,
        [(f, 100 * c / total) for f, c in incl.most_common(n)],
        [(k, 100 * c / total) for k, c in comp.most_common()],
    )
