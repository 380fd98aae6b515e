"""CPU per upstream request: aiohttp vs httpx (plain and on the aiohttp transport if installed).

Starts the mock upstream in a subprocess and issues N sequential non-stream Chat requests from
one event loop (uvloop) with each client, measuring this process's CPU time per request.

    .venv/bin/python bench/upstream_client_cpu.py [--requests 1000]
"""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import time
from pathlib import Path

import aiohttp
import httpx
import orjson
import uvloop

ROOT = Path(__file__).resolve().parent.parent
BODY = orjson.dumps({"model": "m", "messages": [{"role": "user", "content": "hello benchmark"}]})
HEADERS = {"authorization": "Bearer k", "content-type": "application/json"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def run_aiohttp(url: str, n: int) -> float:
    async with aiohttp.ClientSession() as session:

        async def one():
            async with session.post(url, data=BODY, headers=HEADERS) as r:
                orjson.loads(await r.read())

        for _ in range(50):
            await one()
        t = time.process_time()
        for _ in range(n):
            await one()
        return (time.process_time() - t) / n * 1000


async def run_httpx(url: str, n: int, transport=None) -> float:
    async with httpx.AsyncClient(transport=transport) as client:

        async def one():
            r = await client.post(url, content=BODY, headers=HEADERS)
            orjson.loads(r.content)

        for _ in range(50):
            await one()
        t = time.process_time()
        for _ in range(n):
            await one()
        return (time.process_time() - t) / n * 1000


async def main(n: int, port: int) -> None:
    url = f"http://127.0.0.1:{port}/v1/chat/completions"
    print(f"aiohttp          {await run_aiohttp(url, n):.3f} ms CPU/request")
    print(f"httpx            {await run_httpx(url, n):.3f} ms CPU/request")
    try:
        from httpx_aiohttp import AiohttpTransport
    except ImportError:
        return
    transport = AiohttpTransport(client=aiohttp.ClientSession)
    print(f"httpx on aiohttp {await run_httpx(url, n, transport):.3f} ms CPU/request")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=1000)
    args = parser.parse_args()
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "manage.py", "mockupstream", "--port", str(port)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(f"http://127.0.0.1:{port}/_mock/health", timeout=1)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise SystemExit("mock upstream did not start") from None
                time.sleep(0.1)
        uvloop.run(main(args.requests, port))
    finally:
        proc.terminate()
        proc.wait(timeout=10)
