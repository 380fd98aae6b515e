"""py-spy on one gateway worker while load runs: the top frames by own time and by inclusive
time, from py-spy's collapsed-stack ("raw") output."""

from __future__ import annotations

import subprocess
from collections import Counter
from pathlib import Path


def record(pyspy: str, pid: int, seconds: int, out: Path) -> subprocess.Popen:
    """Start sampling now (returns at once); wait on the returned process for the file."""
    return subprocess.Popen([pyspy, "record", "--pid", str(pid), "--duration", str(seconds), "--rate", "250",
                             "--format", "raw", "--nonblocking", "--output", str(out)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)


def _short(frame: str) -> str:
    """``func (path/to/module.py:123)`` -> ``func (module.py)`` with the package folder kept."""
    name, _, where = frame.partition(" (")
    where = where.rstrip(")")
    path = where.rsplit(":", 1)[0]
    parts = path.split("/")
    for anchor in ("site-packages", "lib", "main"):
        if anchor in parts:
            parts = parts[len(parts) - parts[::-1].index(anchor):]
            break
    return f"{name} ({'/'.join(parts[-3:])})"


def top_frames(raw: Path, n: int = 15) -> tuple[int, list[tuple[str, float]], list[tuple[str, float]]]:
    """(samples, [(frame, % own)], [(frame, % inclusive)])."""
    own: Counter[str] = Counter()
    incl: Counter[str] = Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        c = int(count)
        frames = [_short(f) for f in stack.split(";") if f and not f.startswith("process ") and not f.startswith("thread ")]
        if not frames:
            continue
        total += c
        own[frames[-1]] += c
        for f in set(frames):
            incl[f] += c
    if not total:
        return 0, [], []
    return (total, [(f, 100 * c / total) for f, c in own.most_common(n)],
            [(f, 100 * c / total) for f, c in incl.most_common(n)])
