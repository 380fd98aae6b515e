"""How much slower the gateway's request path runs after the process was idle (issue 20, streams).

The streaming first byte of ``make bench`` is timed on sequential paced streams: between two
events the worker sleeps 5 ms, and a stream's first event is produced by code that has not run
for the length of a stream. This script times the same request back to back and after a gap, so
a slow first byte can be told apart from work or a wait in the gateway:

- *generic*: a few hundred µs of plain Python (JSON, dicts, a regex), no gateway code;
- *gateway*: the proxy's ASGI app called directly (as ``bench/hotpath_cpu.py`` does), one
  non-stream Chat request to the paced server, from the call to ``http.response.start``.

Each is run back to back, then after each gap slept with ``asyncio.sleep``/``time.sleep``, and
after the same gap spent spinning (the CPU busy, this thread holding the GIL). p50 of N.

    .venv/bin/python bench/idle_gap.py [--requests 300] [--gaps 0.001,0.008,0.05]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

_DATA = {
    "model": "m",
    "messages": [{"role": "user", "content": f"hello {i}", "x": list(range(20))} for i in range(40)],
}


def _generic() -> None:
    text = json.dumps(_DATA)
    for m in json.loads(text)["messages"]:
        {k: (v.upper() if isinstance(v, str) else v) for k, v in m.items()}
    re.sub(r"\d+", "N", text)


def _pause(gap: float, spin: bool) -> None:
    if spin:
        end = time.perf_counter() + gap
        while time.perf_counter() < end:
            pass
    elif gap:
        time.sleep(gap)


def generic(n: int, gap: float, spin: bool) -> float:
    times = []
    for _ in range(n):
        _pause(gap, spin)
        t = time.perf_counter()
        _generic()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1000


async def gateway(app, scope: dict, body: bytes, n: int, gap: float, spin: bool) -> float:
    times: list[float] = []
    state: dict[str, float] = {}

    async def receive() -> dict:
        if not state.get("read"):
            state["read"] = 1
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.get_running_loop().create_future()  # no disconnect: wait to be cancelled
        return {}

    async def send(message: dict) -> None:
        if message["type"] == "http.response.start":
            state["start"] = time.perf_counter()
            if message["status"] != 200:
                raise SystemExit(f"HTTP {message['status']}")

    for _ in range(n):
        if spin:
            _pause(gap, True)
        elif gap:
            await asyncio.sleep(gap)
        state.clear()
        t = time.perf_counter()
        await app(dict(scope), receive, send)
        times.append(state["start"] - t)
    return statistics.median(times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--gaps", default="0.001,0.008,0.05")
    args = parser.parse_args()
    gaps = [0.0] + [float(g) for g in args.gaps.split(",")]
    import hotpath_cpu

    from bench.harness import procs

    port = procs.free_port()
    paced = subprocess.Popen([sys.executable, str(ROOT / "bench/harness/paced_sse.py"), "--port", str(port)])
    try:
        procs.wait_port(port, paced, "paced")
        setup = argparse.Namespace(root=str(ROOT), port=port, case="chat")
        _, scope = hotpath_cpu._setup(setup)
        body = json.dumps({"model": "bench-stream", "messages": [{"role": "user", "content": "hi"}]}).encode()
        scope["headers"] = [h for h in scope["headers"] if h[0] != b"content-length"]
        scope["headers"].append((b"content-length", str(len(body)).encode()))
        import uvloop

        from gateway.asgi import proxy_app

        async def run() -> None:
            await proxy_app.startup()
            await gateway(proxy_app, scope, body, 100, 0.0, False)  # warm-up
            print("| gap | how | generic ms (p50) | gateway call to response start ms (p50) |")
            print("| --- | --- | --- | --- |")
            for gap in gaps:
                for spin in (False, True) if gap else (False,):
                    g = generic(args.requests, gap, spin)
                    w = await gateway(proxy_app, scope, body, args.requests, gap, spin)
                    how = "back to back" if not gap else ("spin" if spin else "sleep")
                    print(f"| {gap * 1000:g} ms | {how} | {g:.3f} | {w:.3f} |", flush=True)
            await proxy_app.shutdown()

        uvloop.run(run())
    finally:
        procs.stop(paced)


if __name__ == "__main__":
    main()
