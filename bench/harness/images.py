"""Issue 16's image case inside ``make bench``: ``bench/image_compress_bench.py`` (its own gateway,
one worker, and the bundled mock upstream) run ``--runs`` times after the main servers have
stopped, so it measures on an otherwise idle box; its JSON comes back into ``results.json``."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent
IMAGES, MEGAPIXELS = 20, 4.0


def estimate_seconds(args: argparse.Namespace) -> float:
    """Start-up and warm-up, then per run a baseline and a loaded phase (plus image set-up)."""
    return 20 + args.runs * (2 * args.image_seconds + 4)


def run(args: argparse.Namespace, workdir: Path) -> dict:
    out = workdir / "images.json"
    cmd = [
        sys.executable,
        str(BENCH / "image_compress_bench.py"),
        "--images",
        str(IMAGES),
        "--megapixels",
        str(MEGAPIXELS),
        "--seconds",
        str(args.image_seconds),
        "--runs",
        str(args.runs),
        "--json",
        str(out),
    ]
    proc = subprocess.run(cmd, cwd=BENCH.parent, capture_output=True, text=True, timeout=900)
    (workdir / "images.log").write_text(proc.stdout + proc.stderr)
    print("\n".join("  " + line for line in proc.stdout.splitlines()), flush=True)
    if not out.exists():
        return {
            "error": f"image_compress_bench.py exited {proc.returncode}: {(proc.stderr or proc.stdout)[-300:]}"
        }
    return json.loads(out.read_text())
