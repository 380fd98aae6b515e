"""Benchmark case for issue 16: image work must not stall other requests.

    .venv/bin/python bench/image_compress_bench.py [--images 20] [--megapixels 4] [--seconds 10] [--runs 3]
        [--json OUT.json]

``make bench`` runs it (``bench/harness/images.py``) after the other servers have stopped, with
``--runs 3 --json``, and reports the median of the runs' ratios in ``bench/RESULTS.md``.

Starts the mock upstream and the gateway (uvicorn, uvloop, httptools, one worker, SQLite in a
temporary directory, no Redis) on free ports, loads a configuration with two models on the
mock's Chat Completions endpoint: ``bench-text`` (no rules) and ``bench-image`` (provider rule
``image_compress_input`` with ``max_edge_px: 1024, output_format: webp``), then measures:

1. baseline: small text requests from 4 concurrent clients for ``--seconds``; p50 latency;
2. under image load: the same text load while ``--images`` clients each send a request carrying
   a ``--megapixels`` JPEG as a data URL (noise, so it does not compress to nothing), one after
   another for the same period; p50 of the *text* requests.

With ``--runs N`` the pair (baseline, under load) is measured N times in a row on the same
servers; each run's ratio is its loaded p50 over its own baseline p50.

Target (issue 16): the text p50 under image load stays within 2x the baseline p50. Prints both
figures, the ratio and how many images were compressed, and exits 1 when the target is missed.
Not part of ``make test`` (it saturates the machine on purpose).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import io
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
KEY = "sk-bench-image-0001"
ERRORS: list[str] = []


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def jpeg_b64(megapixels: float) -> str:
    from PIL import Image

    side = int((megapixels * 1_000_000) ** 0.5)
    img = Image.frombytes("RGB", (side, side), random.Random(1).randbytes(side * side * 3))
    out = io.BytesIO()
    img.save(out, "JPEG", quality=90)
    return base64.b64encode(out.getvalue()).decode()


def config_yaml(mock_port: int) -> str:
    return f"""
providers:
  - name: bench-text
    channels:
      - {{name: mock, protocol: chat_completion, base_url: "http://127.0.0.1:{mock_port}/v1", api_key: sk-mock,
         models: [{{model: bench-text}}]}}
    transforms: []
  - name: bench-image
    channels:
      - {{name: mock, protocol: chat_completion, base_url: "http://127.0.0.1:{mock_port}/v1", api_key: sk-mock,
         models: [{{model: bench-image}}]}}
    transforms:
      - {{transform: image_compress_input, phase: request, config: {{max_edge_px: 1024, output_format: webp}}}}
global_transforms: []
api_keys:
  - {{name: bench, key: {KEY}, capture_mode: "off", allowed_models: ["*"], transforms: []}}
"""


def wait_http(url: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            httpx.get(url, timeout=2)
            return
        except httpx.TransportError:
            time.sleep(0.2)
    raise RuntimeError(f"{url} did not come up")


async def text_load(client: httpx.AsyncClient, stop: float, latencies: list[float]) -> None:
    body = {"model": "bench-text", "messages": [{"role": "user", "content": "hello"}], "max_tokens": 8}
    while time.perf_counter() < stop:
        t = time.perf_counter()
        r = await client.post("/v1/chat/completions", json=body)
        if r.status_code == 200:
            latencies.append((time.perf_counter() - t) * 1000.0)
        else:
            ERRORS.append(f"text {r.status_code}: {r.text[:200]}")


async def image_load(client: httpx.AsyncClient, stop: float, body: bytes, done: list[float]) -> None:
    while time.perf_counter() < stop:
        t = time.perf_counter()
        r = await client.post(
            "/v1/chat/completions", content=body, timeout=120, headers={"content-type": "application/json"}
        )
        if r.status_code == 200:
            done.append((time.perf_counter() - t) * 1000.0)
        else:
            ERRORS.append(f"image {r.status_code}: {r.text[:200]}")


def image_process(base: str, seconds: float, clients: int, megapixels: float, out) -> None:
    """The image clients, in their own process: serialising and uploading 20 large bodies must
    not delay the text clients' own event loop (that would measure the benchmark, not the
    gateway)."""
    import orjson

    image = jpeg_b64(megapixels)
    body = orjson.dumps(
        {
            "model": "bench-image",
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "what is this?"},
                        {"type": "image_url", "image_url": {"url": f"data:image/jpeg;base64,{image}"}},
                    ],
                }
            ],
        }
    )

    async def go() -> list[float]:
        done: list[float] = []
        limits = httpx.Limits(max_connections=64, max_keepalive_connections=64)
        async with httpx.AsyncClient(
            base_url=base, headers={"authorization": f"Bearer {KEY}"}, limits=limits, timeout=120
        ) as client:
            out.put("ready")
            stop = time.perf_counter() + seconds
            await asyncio.gather(*(image_load(client, stop, body, done) for _ in range(clients)))
        return done

    done = asyncio.run(go())
    out.put((done, ERRORS[:5]))


async def measure(base: str, seconds: float) -> list[float]:
    headers = {"authorization": f"Bearer {KEY}"}
    limits = httpx.Limits(max_connections=64, max_keepalive_connections=64)
    async with httpx.AsyncClient(base_url=base, headers=headers, limits=limits, timeout=60) as client:
        text: list[float] = []
        stop = time.perf_counter() + seconds
        await asyncio.gather(*(text_load(client, stop, text) for _ in range(4)))
        return text


def one_run(base: str, args: argparse.Namespace) -> dict:
    """One baseline and one loaded measurement; the loaded one's image clients run in their own
    process."""
    import multiprocessing

    baseline = asyncio.run(measure(base, args.seconds))
    queue: multiprocessing.Queue = multiprocessing.Queue()
    proc = multiprocessing.Process(
        target=image_process, args=(base, args.seconds + 1.0, args.images, args.megapixels, queue)
    )
    proc.start()
    queue.get(timeout=120)  # the image clients are connected and about to start
    time.sleep(1.0)  # let the image load build up before measuring
    loaded = asyncio.run(measure(base, args.seconds))
    images_done, image_errors = queue.get(timeout=300)
    proc.join(timeout=60)
    ERRORS.extend(image_errors)
    p50_base, p50_load = statistics.median(baseline), statistics.median(loaded)
    print(f"text p50 baseline:          {p50_base:8.2f} ms  ({len(baseline)} requests)")
    print(f"text p50 under image load:  {p50_load:8.2f} ms  ({len(loaded)} requests)")
    if images_done:
        print(
            f"image requests:             {len(images_done)} done, p50 {statistics.median(images_done):.0f} ms"
        )
    print(f"ratio: {p50_load / p50_base:.2f}x (target <= 2.00x)")
    return {
        "baseline_p50": p50_base,
        "loaded_p50": p50_load,
        "ratio": p50_load / p50_base,
        "text_requests": [len(baseline), len(loaded)],
        "images_done": len(images_done),
        "image_p50": statistics.median(images_done) if images_done else None,
    }


def start_servers(tmp: Path) -> tuple[list[subprocess.Popen], str]:
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{tmp / 'db.sqlite3'}",
        "GATEWAY_DATA_DIR": str(tmp),
        "DJANGO_SETTINGS_MODULE": "gateway.settings",
        "LOG_LEVEL": "WARNING",
        "GATEWAY_LOG_LEVEL": "WARNING",
    }
    env.pop("REDIS_URL", None)
    mock_port, gw_port = free_port(), free_port()
    (tmp / "config.yaml").write_text(config_yaml(mock_port))
    subprocess.run([PY, "manage.py", "migrate", "-v", "0"], cwd=ROOT, env=env, check=True)
    subprocess.run(
        [PY, "manage.py", "loadconfig", str(tmp / "config.yaml")],
        cwd=ROOT,
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    procs = [
        subprocess.Popen(
            [PY, "manage.py", "mockupstream", "--host", "127.0.0.1", "--port", str(mock_port)],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        ),
        subprocess.Popen(
            [
                PY,
                "-m",
                "uvicorn",
                "gateway.asgi:application",
                "--host",
                "127.0.0.1",
                "--port",
                str(gw_port),
                "--loop",
                "uvloop",
                "--http",
                "httptools",
                "--no-access-log",
                "--lifespan",
                "on",
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        ),
    ]
    wait_http(f"http://127.0.0.1:{mock_port}/_mock/health")
    wait_http(f"http://127.0.0.1:{gw_port}/healthz")
    return procs, f"http://127.0.0.1:{gw_port}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--images", type=int, default=20)
    parser.add_argument("--megapixels", type=float, default=4.0)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--json", help="also write the figures here")
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="bench-image-"))
    procs: list[subprocess.Popen] = []
    try:
        procs, base = start_servers(tmp)
        print(f"image: {args.megapixels} MP JPEG (noise) as a data URL; {args.images} image clients")
        asyncio.run(measure(base, 2.0))  # warm-up
        runs = [one_run(base, args) for _ in range(args.runs)]
        ratios = [r["ratio"] for r in runs]
        ratio = statistics.median(ratios)
        if ERRORS:
            print(f"{len(ERRORS)} failed requests, first: {ERRORS[0]}")
        print(
            f"median ratio of {len(runs)} runs: {ratio:.2f}x (target <= 2.00x) -> {'met' if ratio <= 2.0 else 'MISSED'}"
        )
        if args.json:
            Path(args.json).write_text(
                json.dumps(
                    {
                        "images": args.images,
                        "megapixels": args.megapixels,
                        "seconds": args.seconds,
                        "runs": runs,
                        "errors": len(ERRORS),
                        "first_error": ERRORS[0] if ERRORS else "",
                        "workers": 1,
                    },
                    indent=1,
                )
            )
        return 0 if ratio <= 2.0 else 1
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()


if __name__ == "__main__":
    sys.exit(main())
