"""Running wrk with a generated Lua script and reading its figures back as JSON.

The script sets the POST body and headers (or cycles through several prepared requests) and, in
``done()``, prints one ``WRKJSON {...}`` line with the counts and the latency percentiles wrk
recorded (microseconds, converted to milliseconds here). One wrk thread: on this 2-core box every
core wrk takes is a core the server under test does not get.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

DONE = r"""
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'WRKJSON {"requests": %d, "duration_us": %d, "bytes": %d, "connect": %d, "read": %d, "write": %d, ' ..
    '"status": %d, "timeout": %d, "p50": %d, "p90": %d, "p99": %d, "max": %d, "mean": %f}\n',
    summary.requests, summary.duration, summary.bytes, e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max, latency.mean))
end
"""


@dataclass
class WrkRequest:
    path: str
    body_file: Path
    headers: dict[str, str]


@dataclass
class WrkResult:
    rps: float
    p50: float
    p90: float
    p99: float
    max: float
    mean: float
    requests: int
    errors: int
    non2xx: int


def _lua_str(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def write_script(
    path: Path, reqs: list[WrkRequest], delay_ms: int = 0, weights: list[int] | None = None
) -> Path:
    """A script for one request shape, or a weighted round-robin over several (the soak's mix)."""
    lines = []
    if len(reqs) == 1:
        r = reqs[0]
        lines.append('wrk.method = "POST"')
        lines.append(f"wrk.path = {_lua_str(r.path)}")
        lines.append(
            f'local f = io.open({_lua_str(str(r.body_file))}, "rb"); wrk.body = f:read("*a"); f:close()'
        )
        lines.append('wrk.headers["Content-Type"] = "application/json"')
        for k, v in r.headers.items():
            lines.append(f"wrk.headers[{_lua_str(k)}] = {_lua_str(v)}")
    else:
        ws = weights or [1] * len(reqs)
        order = [i + 1 for r in range(max(ws)) for i, w in enumerate(ws) if r < w]
        lines.append("local reqs = {}")
        lines.append("local order = {" + ", ".join(map(str, order)) + "}")
        lines.append("local i = 0")
        lines.append("init = function(args)")
        for r in reqs:
            hdrs = ", ".join(
                f"[{_lua_str(k)}] = {_lua_str(v)}"
                for k, v in {"Content-Type": "application/json", **r.headers}.items()
            )
            lines.append(
                f'  local f = io.open({_lua_str(str(r.body_file))}, "rb"); local b = f:read("*a"); f:close()'
            )
            lines.append(f'  table.insert(reqs, wrk.format("POST", {_lua_str(r.path)}, {{{hdrs}}}, b))')
        lines.append("end")
        lines.append("request = function() i = i % #order + 1; return reqs[order[i]] end")
    if delay_ms:
        lines.append(f"delay = function() return {int(delay_ms)} end")
    path.write_text("\n".join(lines) + "\n" + DONE)
    return path


def run(
    port: int, script: Path, *, connections: int, seconds: float, threads: int = 1, timeout_s: int = 30
) -> WrkResult:
    cmd = [
        "wrk",
        "-t",
        str(threads),
        "-c",
        str(connections),
        "-d",
        f"{seconds:g}s",
        "--timeout",
        f"{timeout_s}s",
        "-s",
        str(script),
        f"http://127.0.0.1:{port}",
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + timeout_s + 30)
    line = next((ln for ln in out.stdout.splitlines() if ln.startswith("WRKJSON ")), None)
    if line is None:
        raise RuntimeError(f"wrk printed no summary: {out.stdout[-500:]} {out.stderr[-500:]}")
    d = json.loads(line[len("WRKJSON ") :])
    seconds_run = d["duration_us"] / 1e6
    errors = d["connect"] + d["read"] + d["write"] + d["timeout"]
    return WrkResult(
        rps=d["requests"] / seconds_run,
        p50=d["p50"] / 1000,
        p90=d["p90"] / 1000,
        p99=d["p99"] / 1000,
        max=d["max"] / 1000,
        mean=d["mean"] / 1000,
        requests=d["requests"],
        errors=errors,
        non2xx=d["status"],
    )
