"""Added latency of the gateway against calling the mock upstream directly.

One keep-alive connection each, non-stream Chat Completions, N sequential requests (default
500, after a warm-up): p50/p99 of both and the difference. Starts its own mock upstream and
gateway (uvicorn + uvloop + httptools, one worker) on a throwaway SQLite database.

    .venv/bin/python bench/quick_latency.py [--requests 500]
"""

from __future__ import annotations

import argparse
import os
import secrets
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_up(url: str, proc: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"{url}: server exited with {proc.returncode}")
        try:
            httpx.get(url, timeout=1)
            return
        except httpx.TransportError:
            time.sleep(0.1)
    raise SystemExit(f"{url} did not come up")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def timed(client: httpx.Client, path: str, body: dict, headers: dict, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t = time.perf_counter()
        r = client.post(path, json=body, headers=headers)
        out.append((time.perf_counter() - t) * 1000)
        if r.status_code != 200:
            raise SystemExit(f"{path}: {r.status_code} {r.text[:300]}")
    return out


def timed_stream(
    client: httpx.Client, path: str, body: dict, headers: dict, n: int
) -> tuple[list[float], list[float]]:
    """(time to first byte, time to the end) of streamed requests, in ms."""
    first, total = [], []
    for _ in range(n):
        t = time.perf_counter()
        with client.stream("POST", path, json={**body, "stream": True}, headers=headers) as r:
            it = r.iter_raw()
            next(it)
            first.append((time.perf_counter() - t) * 1000)
            for _chunk in it:
                pass
        total.append((time.perf_counter() - t) * 1000)
    return first, total


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=500)
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="gw-bench-"))
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "gateway.settings",
        "GATEWAY_DATA_DIR": str(tmp),
        "DATABASE_URL": f"sqlite:///{tmp / 'bench.sqlite3'}",
        "SECRET_KEY": secrets.token_urlsafe(40),
        "LOG_LEVEL": "WARNING",
        "GATEWAY_LOG_LEVEL": "WARNING",
    }
    env.pop("REDIS_URL", None)
    os.environ.update(env)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from keys.models import ApiKey
    from providers.models import Channel, ChannelModel, Provider

    mock_port, gw_port = free_port(), free_port()
    provider = Provider.objects.create(name="bench")
    channel = Channel(
        provider=provider,
        name="mock",
        protocol="chat_completion",
        base_url=f"http://127.0.0.1:{mock_port}/v1",
    )
    channel.set_api_key("sk-upstream-bench")
    channel.save()
    ChannelModel.objects.create(channel=channel, model="bench-model")
    key = ApiKey(name="bench")
    secret = key.set_secret()
    key.save()

    procs = [
        subprocess.Popen(
            [sys.executable, "manage.py", "mockupstream", "--port", str(mock_port)],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
        ),
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "uvicorn",
                "gateway.asgi:application",
                "--loop",
                "uvloop",
                "--http",
                "httptools",
                "--port",
                str(gw_port),
                "--no-access-log",
                "--log-level",
                "warning",
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
        ),
    ]
    try:
        wait_up(f"http://127.0.0.1:{mock_port}/_mock/health", procs[0])
        wait_up(f"http://127.0.0.1:{gw_port}/healthz", procs[1])
        body = {"model": "bench-model", "messages": [{"role": "user", "content": "hello benchmark"}]}
        direct = httpx.Client(base_url=f"http://127.0.0.1:{mock_port}", timeout=30)
        via = httpx.Client(base_url=f"http://127.0.0.1:{gw_port}", timeout=30)
        up_headers = {"authorization": "Bearer sk-upstream-bench"}
        gw_headers = {"authorization": f"Bearer {secret}"}
        timed(direct, "/v1/chat/completions", body, up_headers, 50)  # warm-up
        timed(via, "/v1/chat/completions", body, gw_headers, 50)
        d = timed(direct, "/v1/chat/completions", body, up_headers, args.requests)
        g = timed(via, "/v1/chat/completions", body, gw_headers, args.requests)
        overhead = [
            float(
                via.post("/v1/chat/completions", json=body, headers=gw_headers).headers[
                    "x-gateway-overhead-ms"
                ]
            )
            for _ in range(100)
        ]
        print(f"requests: {args.requests} sequential, one keep-alive connection each, non-stream")
        print(
            f"direct  p50 {percentile(d, 0.5):7.3f} ms  p99 {percentile(d, 0.99):7.3f} ms  mean {statistics.mean(d):.3f}"
        )
        print(
            f"gateway p50 {percentile(g, 0.5):7.3f} ms  p99 {percentile(g, 0.99):7.3f} ms  mean {statistics.mean(g):.3f}"
        )
        print(
            f"added   p50 {percentile(g, 0.5) - percentile(d, 0.5):7.3f} ms  p99 {percentile(g, 0.99) - percentile(d, 0.99):7.3f} ms"
        )
        print(
            f"x-gateway-overhead-ms p50 {percentile(overhead, 0.5):.3f}  p99 {percentile(overhead, 0.99):.3f}"
        )
        n = max(50, args.requests // 5)
        df, dt = timed_stream(direct, "/v1/chat/completions", body, up_headers, n)
        gf, gt = timed_stream(via, "/v1/chat/completions", body, gw_headers, n)
        print(
            f"stream ({n}): first byte added p50 {percentile(gf, 0.5) - percentile(df, 0.5):.3f} ms, "
            f"whole stream added p50 {percentile(gt, 0.5) - percentile(dt, 0.5):.3f} ms "
            f"p99 {percentile(gt, 0.99) - percentile(dt, 0.99):.3f} ms"
        )
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()


if __name__ == "__main__":
    main()
