"""Instructions per request of the /v1 hot path, counted by callgrind: a figure load cannot blur.

This box's timings move by ±20 % from run to run, more than most changes to the hot path are
worth; ``valgrind --tool=callgrind`` counts executed instructions instead, the same for the same
code and inputs whatever else runs. ``bench/hotpath_cpu.py``'s child (the proxy's ASGI app called
directly, non-stream Chat against the canned nginx upstream) runs twice under callgrind, with
``--small`` and ``--large`` requests after the same start-up; the difference divided by the
difference in requests is the cost of one request, per thread (the event loop, the request-log
writer; their sum is the total) with start-up excluded.

Under callgrind the process runs ~50 times slower, so the request-log writer's 0.25 s linger
would cut batches 50 times smaller than at full speed; it is stretched to 12 s here, so batches
are about as large as in a loaded gateway; and the config poller (which works per second, not
per request: 50 times more of it per request under callgrind) polls once an hour.

    .venv/bin/python bench/callgrind_per_request.py [--env GATEWAY_REQUEST_LOGS=0]
        [--case chat|chain|chain-body|capture] [--baseline DIR] [--small 200] [--large 1200]

``--case capture``: the key with capture mode ``all``; the capture writer (the thread that ran
zlib) is counted apart. Add ``--env GATEWAY_CAPTURE_WRITER_SHARE=1`` so no capture is shed (the
writer's share is timed, and callgrind slows every thread alike but not the sleeps).

Takes 2-3 minutes per tree (both runs in parallel); needs valgrind (Debian's package).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_CHILD = """
import sys
root = sys.argv[1]
sys.path[:0] = [root, root + "/bench"]
import hotpath_cpu
_setup = hotpath_cpu._setup
def setup(args):
    out = _setup(args)
    from requestlogs import sink
    sink.writer.linger_seconds = 12.0
    return out
hotpath_cpu._setup = setup
sys.argv = ["hotpath_cpu.py", *sys.argv[2:], "--root", root]
hotpath_cpu.main()
"""


def _threads(prefix: Path) -> dict[str, int]:
    """Instructions per thread of one callgrind run (``--separate-threads``), named by the
    thread's role: the first is the event loop's; the writer is the one that ran SQLite (with
    the poller quiet, no other thread does)."""
    out: dict[str, int] = {}
    for part in sorted(prefix.parent.glob(prefix.name + "-*")):
        text = part.read_text(errors="replace")
        total = int(re.search(r"^summary: (\d+)", text, re.M).group(1))  # type: ignore[union-attr]
        if part.name.endswith("-01"):
            name = "loop"
        elif "libz.so" in text:  # the capture writer compresses its dumps
            name = "capture"
        else:
            name = "writer" if "libsqlite3" in text else "other"
        out[name] = out.get(name, 0) + total
    return out


def measure(
    root: Path, env: dict[str, str], small: int, large: int, port: int, case: str
) -> dict[str, float]:
    work = Path(tempfile.mkdtemp(prefix="gw-callgrind-"))
    child = work / "child.py"
    child.write_text(_CHILD)
    procs = {}
    for n in (small, large):
        cmd = [
            "valgrind",
            "--tool=callgrind",
            "--separate-threads=yes",
            f"--callgrind-out-file={work / f'cg.{n}'}",
            sys.executable,
            str(child),
            str(root),
            "--child",
            "--case",
            case,
            "--port",
            str(port),
            "--requests",
            str(n),
        ]
        procs[n] = subprocess.Popen(
            cmd,
            cwd=root,
            # a fixed hash seed: dict and set layouts, and with them the counts, repeat
            env={**os.environ, "GATEWAY_CONFIG_POLL_SECONDS": "3600", "PYTHONHASHSEED": "0", **env},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    for n, proc in procs.items():
        if proc.wait() != 0:
            raise SystemExit(f"callgrind run of {n} requests failed ({root})")
    a, b = _threads(work / f"cg.{small}"), _threads(work / f"cg.{large}")
    per = {name: (b.get(name, 0) - a.get(name, 0)) / (large - small) for name in set(a) | set(b)}
    per["total"] = sum(per.values())
    return per


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--env", action="append", default=[], help="NAME=VALUE for both trees")
    parser.add_argument("--baseline", type=Path, default=None)
    parser.add_argument(
        "--case", default="chat", help="hotpath_cpu's case: chat, chain, chain-body or capture"
    )
    parser.add_argument("--small", type=int, default=200)
    parser.add_argument("--large", type=int, default=1200)
    args = parser.parse_args()
    env = dict(item.split("=", 1) for item in args.env)
    sys.path.insert(0, str(ROOT))
    from bench.harness import nginx_mock, procs

    port = procs.free_port()
    nginx = nginx_mock.start(Path(tempfile.mkdtemp(prefix="gw-callgrind-nginx-")), port)
    trees = {"this": ROOT}
    if args.baseline is not None:
        trees = {"baseline": args.baseline.resolve(), **trees}
    try:
        for name, root in trees.items():
            per = measure(root, env, args.small, args.large, port, args.case)
            names = ("loop", "writer", "capture", "other", "total")
            cells = "  ".join(f"{k} {per[k]:,.0f}" for k in names if k in per)
            print(f"{name:8s} instructions per request: {cells}", flush=True)
    finally:
        procs.stop(nginx)


if __name__ == "__main__":
    main()
