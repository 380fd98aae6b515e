"""1,000 concurrent paced streams (issue 20): held with no error, first byte per stream, RSS.

A separate paced SSE server (``paced_sse.py`` with long streams: ``deltas`` events ``interval_ms``
apart, 20 s by default) serves the provider ``bench-stream-many``. The client opens ``streams``
connections, one stream each, started at an even rate over ``ramp`` seconds so that all of them
are open at once for the second half of every stream (the first byte measures the gateway, not a
burst of 1,000 simultaneous request heads queueing on two cores). It runs against the paced server
directly, then through the gateway, and records per stream: time to the first body byte, errors
(connect, status, a stream that ends without ``[DONE]``). Meanwhile it samples the gateway
workers' RSS; after the gateway run it waits for the RSS to come back to the idle value.

Raw asyncio sockets and httptools' parser (as ``stream_client``): ~1,000 file descriptors on each
side of the gateway, so ``raise_nofile()`` lifts the soft limit for this process and the servers it
starts (call it before starting them). The gateway's upstream pool has no connection limit
(``gateway.proxy.upstream``) and its per-worker client cap (``GATEWAY_CLIENT_MAX_CONNECTIONS``,
1,000) applies only to the guarded protocol of ``make run``.
"""

from __future__ import annotations

import asyncio
import resource
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httptools

from . import memory, procs
from .stats import percentile
from .stream_client import build_request

HERE = Path(__file__).resolve().parent


def raise_nofile(want: int = 65536) -> int:
    """Lift this process's soft RLIMIT_NOFILE towards ``want`` (capped by the hard limit);
    children started afterwards inherit it. Returns the soft limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = want if hard == resource.RLIM_INFINITY else min(want, hard)
    if soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def start_paced(port: int, deltas: int, interval_ms: float) -> subprocess.Popen:
    proc = subprocess.Popen(
        [
            sys.executable,
            str(HERE / "paced_sse.py"),
            "--port",
            str(port),
            "--deltas",
            str(deltas),
            "--interval-ms",
            str(interval_ms),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    procs.wait_port(port, proc, "paced SSE server (many streams)")
    return proc


@dataclass
class Side:
    """One system's run: first-byte ms per stream that answered, and the errors."""

    first: list[float] = field(default_factory=list)
    errors: dict[str, int] = field(default_factory=dict)
    peak_open: int = 0
    seconds: float = 0.0

    def error(self, kind: str) -> None:
        self.errors[kind] = self.errors.get(kind, 0) + 1

    def summary(self) -> dict:
        f = sorted(self.first)
        return {
            "streams_ok": len(f),
            "errors": self.errors,
            "peak_open": self.peak_open,
            "first_p50": percentile(f, 0.5) if f else None,
            "first_p99": percentile(f, 0.99) if f else None,
            "first_max": f[-1] if f else None,
            "seconds": round(self.seconds, 1),
        }


class _Stream:
    __slots__ = ("t0", "first", "done", "tail")

    def __init__(self) -> None:
        self.t0 = 0.0
        self.first: float | None = None
        self.done = False
        self.tail = b""

    def on_body(self, data: bytes) -> None:
        if self.first is None:
            self.first = time.perf_counter()
        self.tail = (self.tail + data)[-64:]

    def on_message_complete(self) -> None:
        self.done = True


async def _one(port: int, raw: bytes, side: Side, open_now: list[int], timeout: float) -> None:
    state = _Stream()
    parser = httptools.HttpResponseParser(state)
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), timeout)
    except (OSError, TimeoutError):
        side.error("connect")
        return
    open_now[0] += 1
    side.peak_open = max(side.peak_open, open_now[0])
    try:
        async with asyncio.timeout(timeout):
            state.t0 = time.perf_counter()
            writer.write(raw)
            while not state.done:
                data = await reader.read(65536)
                if not data:
                    side.error("closed mid-stream")
                    return
                parser.feed_data(data)
        if parser.get_status_code() != 200:
            side.error(f"HTTP {parser.get_status_code()}")
        elif b"[DONE]" not in state.tail:
            side.error("no [DONE]")
        elif state.first is not None:
            side.first.append((state.first - state.t0) * 1000)
    except TimeoutError:
        side.error("timeout")
    except (OSError, httptools.HttpParserError):
        side.error("connection error")
    finally:
        open_now[0] -= 1
        writer.close()


async def run_side(
    port: int, path: str, body: bytes, headers: dict[str, str], streams: int, ramp: float, timeout: float
) -> Side:
    """``streams`` streams against ``port``, started evenly over ``ramp`` seconds."""
    side = Side()
    raw = build_request(port, path, body, headers)
    open_now = [0]
    loop = asyncio.get_running_loop()
    start = loop.time()
    tasks = []
    for i in range(streams):
        delay = start + ramp * i / streams - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(_one(port, raw, side, open_now, timeout)))
    await asyncio.gather(*tasks)
    side.seconds = loop.time() - start
    return side


def settle_rss(master: int, idle: float, seconds: float = 90.0) -> tuple[float, float]:
    """Wait (up to ``seconds``) for the workers' RSS sum to come back within 5 % (or 5 MB) of
    ``idle``; returns (RSS sum now, seconds waited). The upstream pool keeps its idle keep-alive
    connections (one per stream that ran at once) for 60 s, so 90 s by default."""
    t0 = time.monotonic()
    while True:
        now = sum(memory.workers_rss(master))
        if now <= idle + max(5.0, idle * 0.05) or time.monotonic() - t0 >= seconds:
            return now, time.monotonic() - t0
        time.sleep(1.0)


def run(
    *,
    gateway_master: int,
    gateway_port: int,
    paced_port: int,
    path: str,
    gw_body: bytes,
    direct_body: bytes,
    gw_headers: dict[str, str],
    direct_headers: dict[str, str],
    streams: int = 1000,
    ramp: float = 10.0,
    stream_seconds: float = 20.0,
) -> dict:
    """The case: direct then gateway, RSS idle / peak during / after. A dict for results.json."""
    timeout = stream_seconds * 3 + ramp
    idle = memory.workers_rss(gateway_master)
    direct = asyncio.run(run_side(paced_port, path, direct_body, direct_headers, streams, ramp, timeout))
    with memory.Sampler(gateway_master, every=0.5) as sampler:
        gateway = asyncio.run(run_side(gateway_port, path, gw_body, gw_headers, streams, ramp, timeout))
    after, waited = settle_rss(gateway_master, sum(idle))
    d, g = direct.summary(), gateway.summary()
    added = {
        q: (g[f"first_{q}"] - d[f"first_{q}"])
        if g[f"first_{q}"] is not None and d[f"first_{q}"] is not None
        else None
        for q in ("p50", "p99")
    }
    return {
        "streams": streams,
        "ramp_seconds": ramp,
        "stream_seconds": stream_seconds,
        "direct": d,
        "gateway": g,
        "added_first_p50": added["p50"],
        "added_first_p99": added["p99"],
        "rss_idle": idle,
        "rss_peak": sampler.peak_per_worker,
        "rss_after": after,
        "rss_settle_seconds": waited,
    }


def markdown(res: dict) -> str:
    """The report's section for this case."""

    def ms(v: float | None) -> str:
        return "n/a" if v is None else f"{v:.3f}"

    d, g = res["direct"], res["gateway"]
    idle, peak = sum(res["rss_idle"]), sum(res["rss_peak"] or [0.0])
    errors = sum(g["errors"].values())
    lines = [
        f"## {res['streams']} concurrent paced streams",
        "",
        f"`bench/harness/many_streams.py`: {res['streams']} connections, one Chat stream each "
        f"({res['stream_seconds']:g} s long), started evenly over {res['ramp_seconds']:g} s so that all are open "
        "at once; direct (the paced server) then through the gateway. First byte = first body byte.",
        "",
        "| | streams ok | errors | most open at once | first byte p50 ms | p99 ms | max ms |",
        "| --- | --- | --- | --- | --- | --- | --- |",
        f"| direct | {d['streams_ok']} | {d['errors'] or 0} | {d['peak_open']} | {ms(d['first_p50'])} | "
        f"{ms(d['first_p99'])} | {ms(d['first_max'])} |",
        f"| gateway | {g['streams_ok']} | {g['errors'] or 0} | {g['peak_open']} | {ms(g['first_p50'])} | "
        f"{ms(g['first_p99'])} | {ms(g['first_max'])} |",
        "",
        f"Added first byte: p50 {ms(res['added_first_p50'])} ms, p99 {ms(res['added_first_p99'])} ms "
        f"(target p99 ≤ 5 ms: **{'yes' if (res['added_first_p99'] or 1e9) <= 5 else 'no'}**). Errors through the "
        f"gateway: {errors} (**{'yes' if errors == 0 else 'no'}**, target 0).",
        f"RSS of both workers: idle {idle:.1f} MB, peak during {peak:.1f} MB "
        f"(target ≤ 300 MB: **{'yes' if peak <= 300 else 'no'}**), after {res['rss_after']:.1f} MB "
        f"({res['rss_settle_seconds']:.0f} s after the last stream; back to idle: "
        f"**{'yes' if res['rss_after'] <= idle + max(5.0, idle * 0.05) else 'no'}**).",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    """Standalone: ``cd bench && python -m harness.many_streams [--streams 1000]`` starts its own
    paced server and gateway (two workers, the launcher ``make run`` uses) and prints the section."""
    import argparse
    import json
    import os

    sys.path.insert(0, str(HERE.parent))
    from harness import payloads, servers

    p = argparse.ArgumentParser()
    p.add_argument("--streams", type=int, default=1000)
    p.add_argument("--ramp", type=float, default=10.0)
    p.add_argument("--deltas", type=int, default=100)
    p.add_argument("--interval-ms", type=float, default=200.0)
    p.add_argument("--server", default="reuseport", choices=servers.SERVERS)
    p.add_argument("--workdir", default="/tmp/many-streams")
    p.add_argument("--output", help="also write the Markdown section here (e.g. bench/STREAMS.md)")
    args = p.parse_args()
    os.chdir(servers.ROOT)
    raise_nofile()
    port = procs.free_port()
    paced = start_paced(port, args.deltas, args.interval_ms)
    gw = servers.Gateway(Path(args.workdir), procs.free_port(), workers=2, server=args.server)
    try:
        gw.prepare(servers.Upstreams(port, port, many_port=port))
        gw.start()
        res = run(
            gateway_master=gw.proc.pid,
            gateway_port=gw.port,
            paced_port=port,
            path="/v1/chat/completions",
            gw_body=payloads.dumps(payloads.chat_body("bench-stream-many", stream=True)),
            direct_body=payloads.dumps(payloads.chat_body("bench-model", stream=True)),
            gw_headers={"authorization": f"Bearer {servers.PLAIN_KEY}"},
            direct_headers={"authorization": f"Bearer {servers.UPSTREAM_KEY}"},
            streams=args.streams,
            ramp=args.ramp,
            stream_seconds=args.deltas * args.interval_ms / 1000,
        )
    finally:
        procs.stop(gw.proc)
        procs.stop(paced)
    print(json.dumps(res, indent=1))
    text = (
        markdown(res)
        + f"\nLoad average at the end: {' '.join(Path('/proc/loadavg').read_text().split()[:3])}.\n"
    )
    print(text)
    if args.output:
        Path(args.output).write_text(
            f"# Many streams (`python -m harness.many_streams`, from bench/)\n\n{text}"
        )


if __name__ == "__main__":
    main()
