"""Run mypy and hold every module to the error count in ``mypy-baseline.txt``.

A module may only get better: more errors than its baseline (or errors in a module the baseline
does not list) fail the run. ``--update`` rewrites the baseline to today's counts, which is how a
pull request that fixed errors locks in the gain. The baseline only ever shrinks.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BASELINE = ROOT / "mypy-baseline.txt"
ERROR = re.compile(r"^(?P<path>[^:\s]+\.py):\d+: error:")


def current_counts() -> tuple[Counter[str], str]:
    proc = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True)
    counts: Counter[str] = Counter()
    for line in proc.stdout.splitlines():
        match = ERROR.match(line)
        if match:
            counts[match["path"]] += 1
    if proc.returncode not in (0, 1) or (proc.returncode == 1 and not counts):
        sys.exit(f"mypy did not run cleanly:\n{proc.stdout}\n{proc.stderr}")
    return counts, proc.stdout


def read_baseline() -> Counter[str]:
    counts: Counter[str] = Counter()
    if BASELINE.exists():
        for line in BASELINE.read_text().splitlines():
            if line.strip() and not line.startswith("#"):
                path, _, n = line.rpartition(" ")
                counts[path] = int(n)
    return counts


def write_baseline(counts: Counter[str]) -> None:
    lines = ["# mypy errors per module allowed today; only ever lower these (tools/mypy_ratchet.py)"]
    lines += [f"{path} {n}" for path, n in sorted(counts.items())]
    BASELINE.write_text("\n".join(lines) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--update", action="store_true", help="rewrite the baseline to today's counts")
    args = parser.parse_args()
    counts, output = current_counts()
    if args.update:
        write_baseline(counts)
        print(f"baseline: {sum(counts.values())} errors in {len(counts)} modules")
        return 0
    baseline = read_baseline()
    worse = {p: (baseline.get(p, 0), n) for p, n in counts.items() if n > baseline.get(p, 0)}
    better = {p: (n, counts.get(p, 0)) for p, n in baseline.items() if counts.get(p, 0) < n}
    if worse:
        print(output)
        for path, (allowed, found) in sorted(worse.items()):
            print(f"mypy ratchet: {path} has {found} errors, baseline allows {allowed}")
        return 1
    for path, (allowed, found) in sorted(better.items()):
        print(f"mypy ratchet: {path} improved {allowed} -> {found}; run tools/mypy_ratchet.py --update")
    print(f"mypy ratchet: {sum(counts.values())} errors, none above the baseline")
    return 0


if __name__ == "__main__":
    sys.exit(main())
