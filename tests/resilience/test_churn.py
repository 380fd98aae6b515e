"""Connection churn (issue 13): 2,000 client connections opened and closed against instance a
(two workers), on loopback, in two rounds of 1,000 with up to 200 open at once. The mix:
non-stream requests on ``Connection: close``, three requests on one kept-alive connection,
streams read to the end, requests abandoned mid-body (half of them with a reset), streams
abandoned after their first frame (reset), and connections closed before sending anything.

Held afterwards, per worker of a (``/proc/PID``): file descriptors and upstream connections do not
grow from one round to the next (a leak grows with every round; the upstream pool's idle
keep-alive connections do not), no upstream request is left in flight (the mock's count), RSS
does not grow from round to round; and every request that was read to its end was answered
correctly. Idle figures (before the churn) are reported next to them.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import struct
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.resilience.harness import FIGURES, SECRET, until, worker_pids

pytestmark = [pytest.mark.e2e, pytest.mark.resilience, pytest.mark.timeout(180)]

CONNECTIONS = int(os.environ.get("RESILIENCE_CHURN_CONNECTIONS", "2000"))
ROUNDS = 2
CONCURRENCY = 200
KINDS = (
    ["close"] * 6 + ["keepalive"] * 4 + ["stream"] * 3 + ["abort-body"] * 3 + ["abort-stream"] * 3 + ["idle"]
)


def _request(
    model: str = "topo-chat", stream: bool = False, keep_alive: bool = False, body_cut: int = 0
) -> bytes:
    body = json.dumps(
        {"model": model, "stream": stream, "messages": [{"role": "user", "content": "hi"}]}
    ).encode()
    head = (
        f"POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer {SECRET}\r\n"
        f"content-type: application/json\r\ncontent-length: {len(body)}\r\n"
        f"connection: {'keep-alive' if keep_alive else 'close'}\r\n\r\n"
    ).encode()
    return head + (body[:body_cut] if body_cut else body)


async def _read_response(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    """One response, by its content-length or its chunks (non-stream answers)."""
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    headers = dict(line.lower().split(b":", 1) for line in head.split(b"\r\n")[1:] if b":" in line)
    if b"content-length" in headers:
        return status, await reader.readexactly(int(headers[b"content-length"]))
    body = b""
    while size := int((await reader.readuntil(b"\r\n")).strip(), 16):
        body += await reader.readexactly(size)
        await reader.readexactly(2)
    await reader.readexactly(2)
    return status, body


def _reset(writer: asyncio.StreamWriter) -> None:
    """Close with a TCP reset (SO_LINGER 0), as a client that crashes does."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.close()


async def _one(port: int, kind: str, n: int) -> str:
    """One connection of ``kind``; the outcome: ``ok``, ``aborted`` or what went wrong."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        if kind == "idle":
            return "aborted"
        if kind == "abort-body":
            writer.write(_request(body_cut=20))
            await writer.drain()
            await asyncio.sleep(0.01)
            _reset(writer) if n % 2 else writer.close()
            return "aborted"
        if kind == "abort-stream":
            writer.write(_request("topo-slow", stream=True))
            await writer.drain()
            await reader.readuntil(b"data:")
            _reset(writer)
            return "aborted"
        if kind == "stream":
            writer.write(_request(stream=True))
            data = await reader.read(-1)
            ok = data.startswith(b"HTTP/1.1 200") and b"data: [DONE]" in data
            return "ok" if ok else f"bad stream: {data[:80]!r}"
        rounds = 3 if kind == "keepalive" else 1
        for i in range(rounds):
            writer.write(_request(keep_alive=kind == "keepalive" and i < rounds - 1))
            status, body = await _read_response(reader)
            if status != 200 or b'"choices"' not in body:
                return f"bad answer: {status} {body[:80]!r}"
        return "ok"
    finally:
        if not writer.is_closing():
            writer.close()


async def _churn(port: int, count: int, offset: int) -> Counter:
    gate = asyncio.Semaphore(CONCURRENCY)

    async def run(n: int) -> str:
        async with gate:
            kind = KINDS[n % len(KINDS)]
            try:
                outcome = await asyncio.wait_for(_one(port, kind, n), 30)
            except Exception as exc:  # a refused or cut connection, a timeout
                outcome = f"{type(exc).__name__}"
            return f"{kind}:{outcome}"

    return Counter(await asyncio.gather(*(run(offset + n) for n in range(count))))


def _upstream_sockets(pid: int, port: int) -> int:
    """Established TCP connections of process ``pid`` to ``port`` (the mock upstream)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    count = 0
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            parts = line.split()
            if parts[3] == "01" and int(parts[2].rsplit(":", 1)[1], 16) == port and parts[9] in inodes:
                count += 1
    return count


def _worker_state(pids: list[int], mock_port: int) -> dict[int, dict[str, int]]:
    state = {}
    for pid in pids:
        status = Path(f"/proc/{pid}/status").read_text()
        rss = int(next(line for line in status.splitlines() if line.startswith("VmRSS:")).split()[1])
        state[pid] = {
            "fds": len(os.listdir(f"/proc/{pid}/fd")),
            "rss_mib": round(rss / 1024),
            "upstream": _upstream_sockets(pid, mock_port),
        }
    return state


def _settle(pids: list[int], mock_port: int, mock_upstream, limit: dict[int, dict[str, int]] | None) -> dict:
    """Waits until no upstream request is in flight and (with ``limit``) every worker's fds and
    upstream connections are back within it; then the state. Client connections close within the
    keep-alive timeout (5 s)."""
    until(lambda: mock_upstream.stats()["in_flight"] <= 1, 20, step=0.2)  # the stats request itself
    if limit is not None:

        def back() -> bool:
            now = _worker_state(pids, mock_port)
            return all(
                now[p]["fds"] <= limit[p]["fds"] + 4 and now[p]["upstream"] <= limit[p]["upstream"] + 2
                for p in pids
            )

        try:
            until(back, 20, step=0.5)
        except AssertionError:
            pass  # reported and held below
    else:
        time.sleep(6.0)  # the kept-alive client connections time out
    return _worker_state(pids, mock_port)


def test_two_thousand_connections_opening_and_dropping_leave_no_leak(topo, mock_upstream):
    pids = sorted(worker_pids(topo.a))
    assert len(pids) == 2, pids
    mock_port = int(mock_upstream.url.rsplit(":", 1)[1].split("/")[0])
    idle = _worker_state(pids, mock_port)
    per_round = CONNECTIONS // ROUNDS
    outcomes: Counter = Counter()
    after: list[dict] = []
    at_end: list[int] = []  # upstream connections of a's workers as a round ends (the pool in use)
    t0 = time.monotonic()
    for r in range(ROUNDS):
        outcomes += asyncio.run(_churn(topo.a.port, per_round, r * per_round))
        at_end.append(sum(v["upstream"] for v in _worker_state(pids, mock_port).values()))
        after.append(_settle(pids, mock_port, mock_upstream, after[0] if after else None))
    elapsed = time.monotonic() - t0
    bad = {k: v for k, v in outcomes.items() if not k.endswith((":ok", ":aborted"))}
    first, last = after[0], after[-1]
    FIGURES[
        f"Connection churn: {CONNECTIONS} connections against instance a ({ROUNDS} rounds, {CONCURRENCY} open at once)"
    ] = {
        "connections": sum(outcomes.values()),
        "outcomes": dict(sorted(outcomes.items())),
        "wall time, both rounds with settling (s)": round(elapsed, 1),
        "workers of a": len(pids),
        **{
            f"worker {i + 1}: fds idle / after round 1 / after round 2": [
                idle[p]["fds"],
                first[p]["fds"],
                last[p]["fds"],
            ]
            for i, p in enumerate(pids)
        },
        **{
            f"worker {i + 1}: upstream connections idle / after 1 / after 2": [
                idle[p]["upstream"],
                first[p]["upstream"],
                last[p]["upstream"],
            ]
            for i, p in enumerate(pids)
        },
        **{
            f"worker {i + 1}: RSS MiB idle / after 1 / after 2": [
                idle[p]["rss_mib"],
                first[p]["rss_mib"],
                last[p]["rss_mib"],
            ]
            for i, p in enumerate(pids)
        },
        "upstream connections of both workers as each round ended": at_end,
        "upstream requests in flight afterwards (mock)": max(0, mock_upstream.stats()["in_flight"] - 1),
        "note": "idle pooled upstream connections close within the mock's keep-alive (5 s); a leak would grow per round",
    }
    assert sorted(worker_pids(topo.a)) == pids  # no worker died
    assert not bad, bad  # every connection read to its end was answered correctly
    assert sum(v for k, v in outcomes.items() if k.endswith(":ok")) >= CONNECTIONS * 0.6
    for p in pids:
        assert last[p]["fds"] <= first[p]["fds"] + 4, (p, first[p], last[p])  # no fd leak
        assert last[p]["upstream"] <= first[p]["upstream"] + 2, (p, first[p], last[p])  # no upstream leak
        assert last[p]["upstream"] <= CONCURRENCY  # bounded by the peak, not by the connection count
        assert last[p]["rss_mib"] <= first[p]["rss_mib"] + 32, (p, first[p], last[p])  # no growth per round
    assert mock_upstream.stats()["in_flight"] <= 1
