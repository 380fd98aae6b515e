"""Connection churn (issue 13): about 2,000 client connections held open at once against instance
a (two workers), opening and dropping at random for ``RESILIENCE_CHURN_SECONDS`` (60 for the
RESULTS.md run; CI may shorten it), then a second, shorter round to tell a leak (which grows with
every round) from the allocator's high-water mark (which does not).

Each of ``CONCURRENT`` client tasks opens one connection after another until the round ends,
each of a kind drawn at random: a non-stream request on ``Connection: close``, a few requests on a
kept-alive connection with pauses between them, a stream read to its end, a stream abandoned
after its first frame (reset), a request abandoned mid-body, a request head left unfinished, a
connection that sends nothing; the abandoned ones are held open first (a body 20-55 s, under
the gateway's 60 s body timeout; a head or nothing 2-8 s, under its 10 s header timeout) and then
closed or reset, and the requests wait a random moment before they are sent. Most connections
are long-lived so that 2,000 are open at once at about 80 new connections a second: at a few
hundred a second (short holds) a 2-core machine shared with other work could not accept them
as fast as they came, the accept queue (2,048) filled with connections their clients had
already dropped, and the gateway held few. A connection the client gives up on after 30 s is
counted, a wrong answer fails the test. The per-worker cap (``GATEWAY_CLIENT_MAX_CONNECTIONS``,
1,000) would shed the busier worker's share of 2,000 (the two workers share the listening socket
and do not split it evenly), so the topology raises it to 2,500
(``tests/resilience/topology.base_env``); the test holds that nothing was shed.

Held afterwards, per worker of a (``/proc/PID``): file descriptors back to their value after the
first round and upstream connections back to idle (the pool's keep-alive connections close
within the mock's 5 s), no upstream request left in flight (the mock's count), RSS no higher after
the second round than after the first (a leak would grow) and within ``RSS_SLACK_MIB`` of its idle
value (the gateway returns freed heap to the system when a burst of connections has gone,
``gateway.serving``; what stays is not free heap), and every request that was read to its end
was answered correctly.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import random
import socket
import statistics
import struct
import threading
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest

from tests.resilience.harness import FIGURES, SECRET, until, worker_pids

pytestmark = [pytest.mark.e2e, pytest.mark.resilience, pytest.mark.timeout(300)]

SECONDS = float(os.environ.get("RESILIENCE_CHURN_SECONDS", "60"))
CONCURRENT = int(os.environ.get("RESILIENCE_CHURN_CONCURRENT", "2000"))
SECOND_ROUND = max(10.0, SECONDS / 2)  # the leak check: does a second round add to the first?
# Settled RSS within this of its idle value: after the heap trim about 8-12 MiB stay (live memory
# and partly used object arenas, flat over rounds); without the trim 22-26 MiB stayed.
RSS_SLACK_MIB = 16
KINDS = {  # kind: weight (a fifth of the connections send requests; most are held open)
    "close": 1,
    "keepalive": 1,
    "stream": 1,
    "abort-stream": 1,
    "abort-body": 14,
    "slow-head": 3,
    "idle": 3,
}


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


def _drop(writer: asyncio.StreamWriter, rng: random.Random) -> str:
    _reset(writer) if rng.random() < 0.5 else writer.close()
    return "aborted"


def _hold(kind: str, rng: random.Random, t_end: float) -> float:
    """How long an abandoned connection is held, cut at the round's end. A body may wait up to
    the gateway's 60 s body timeout, a head (or nothing) up to its 10 s header timeout."""
    seconds = rng.uniform(20.0, 55.0) if kind == "abort-body" else rng.uniform(2.0, 8.0)
    return max(0.1, min(seconds, t_end - time.monotonic()))


async def _one(port: int, kind: str, rng: random.Random, live: Counter, hold: float) -> str:
    """One connection of ``kind``; the outcome: ``ok``, ``aborted`` or what went wrong.
    ``live["open"]`` counts the connections open right now."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    live["open"] += 1
    try:
        if kind in ("idle", "slow-head", "abort-body"):
            if kind == "slow-head":
                writer.write(_request()[:40])
            elif kind == "abort-body":
                writer.write(_request(body_cut=20))
            await asyncio.sleep(hold)
            return _drop(writer, rng)
        await asyncio.sleep(rng.uniform(0.0, 5.0))  # the client takes its time
        if kind == "abort-stream":
            writer.write(_request("topo-slow", stream=True))
            await reader.readuntil(b"data:")
            _reset(writer)
            return "aborted"
        if kind == "stream":
            live["requests"] += 1
            writer.write(_request(stream=True))
            data = await reader.read(-1)
            ok = data.startswith(b"HTTP/1.1 200") and b"data: [DONE]" in data
            return "ok" if ok else f"bad stream: {data[:80]!r}"
        rounds = rng.randint(2, 4) if kind == "keepalive" else 1
        for i in range(rounds):
            if i:
                await asyncio.sleep(rng.uniform(0.0, 2.0))  # within the 5 s keep-alive
            writer.write(_request(keep_alive=i < rounds - 1))
            live["requests"] += 1
            status, body = await _read_response(reader)
            if status != 200 or b'"choices"' not in body:
                return f"bad answer: {status} {body[:80]!r}"
        return "ok"
    finally:
        live["open"] -= 1
        if not writer.is_closing():
            writer.close()


async def _churn(port: int, seconds: float, seed: int) -> tuple[Counter, list[int]]:
    """``CONCURRENT`` clients, each opening connections of random kinds one after another for
    ``seconds``. Returns the outcomes and the client side's open connections, sampled."""
    live: Counter = Counter()
    samples: list[int] = []
    t_end = time.monotonic() + seconds
    kinds, weights = list(KINDS), list(KINDS.values())

    async def client(n: int) -> Counter:
        rng = random.Random(seed * 100_000 + n)
        outcomes: Counter = Counter()
        await asyncio.sleep(rng.uniform(0.0, 20.0))  # ramp up (the accept queue holds 2,048)
        while time.monotonic() < t_end:
            kind = rng.choices(kinds, weights)[0]
            hold = _hold(kind, rng, t_end)  # 30 s for the rest: connecting, being answered
            try:
                outcome = await asyncio.wait_for(_one(port, kind, rng, live, hold), 30 + hold)
            except Exception as exc:  # a refused or cut connection, a timeout
                outcome = f"{type(exc).__name__}"
            outcomes[f"{kind}:{outcome}"] += 1
        return outcomes

    async def sample() -> None:
        while time.monotonic() < t_end:
            samples.append(live["open"])
            await asyncio.sleep(0.5)

    sampler = asyncio.ensure_future(sample())
    results = await asyncio.gather(*(client(n) for n in range(CONCURRENT)))
    await sampler
    outcomes = sum(results, Counter())
    outcomes["requests sent"] = live["requests"]
    return outcomes, samples


def _churn_process(port: int, seconds: float, seed: int) -> tuple[Counter, list[int]]:
    """The clients run in a process of their own (uvloop): in the test process they starved the
    mock upstream's thread of the GIL, and the gateway's calls to it failed."""
    import uvloop

    return uvloop.run(_churn(port, seconds, seed))


class FdSampler(threading.Thread):
    """The most file descriptors each worker held during a round (/proc/PID/fd every 0.5 s)."""

    def __init__(self, pids: list[int]) -> None:
        super().__init__(daemon=True)
        self.pids, self.peak = pids, dict.fromkeys(pids, 0)
        self._stop_at = threading.Event()

    def run(self) -> None:
        while not self._stop_at.wait(0.5):
            for pid in self.pids:
                self.peak[pid] = max(self.peak[pid], len(os.listdir(f"/proc/{pid}/fd")))

    def stop(self) -> dict[int, int]:
        self._stop_at.set()
        self.join(5)
        return self.peak


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
            "heap_mib": _heap_mib(pid),
            "upstream": _upstream_sockets(pid, mock_port),
        }
    return state


def _heap_mib(pid: int) -> float:
    """Resident MiB of the C heap (``[heap]``, glibc's main arena) and of anonymous mappings
    (thread arenas, Python's object arenas): where a rise in RSS sits."""
    total, current = 0, False
    for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
        if not line[:1].isupper() or ":" not in line.split()[0]:  # a mapping's header line
            fields = line.split()
            current = len(fields) < 6 or fields[5] == "[heap]"
        elif current and line.startswith("Rss:"):
            total += int(line.split()[1])
    return round(total / 1024, 1)


def _settle(pids: list[int], mock_port: int, mock_upstream, idle: dict, fds: dict | None) -> dict:
    """Waits until no upstream request is in flight, every worker's upstream connections are back
    to idle (the pool's keep-alive connections close within the mock's 5 s) and (with ``fds``)
    its file descriptors back within them; then the state."""
    until(lambda: mock_upstream.stats()["in_flight"] <= 1, 30, step=0.2)  # the stats request itself

    def back() -> bool:
        now = _worker_state(pids, mock_port)
        return all(
            now[p]["upstream"] <= idle[p]["upstream"] + 2
            and (fds is None or now[p]["fds"] <= fds[p]["fds"] + 4)
            for p in pids
        )

    try:
        until(back, 20, step=0.5)
    except AssertionError:
        pass  # reported and held below
    time.sleep(2.0)  # the heap trim after the burst (gateway.serving) has run
    return _worker_state(pids, mock_port)


def _round(topo, pids: list[int], seconds: float, seed: int) -> dict:
    fd_peak = FdSampler(pids)
    fd_peak.start()
    t0 = time.monotonic()
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        outcomes, samples = pool.submit(_churn_process, topo.a.port, seconds, seed).result(seconds + 120)
    sent = outcomes.pop("requests sent")
    steady = samples[len(samples) // 3 :] or samples  # after the ramp-up
    return {
        "outcomes": outcomes,
        "requests": sent,
        "seconds": round(time.monotonic() - t0, 1),
        "open": [min(steady), round(statistics.median(steady)), max(samples)],
        "fd_peak": fd_peak.stop(),
    }


def _per_worker(pids: list[int], label: str, values) -> dict[str, list]:
    return {f"worker {i + 1}: {label}": values(p) for i, p in enumerate(pids)}


def test_two_thousand_connections_opening_and_dropping_leave_no_leak(topo, mock_upstream):
    pids = sorted(worker_pids(topo.a))
    assert len(pids) == 2, pids
    mock_port = int(mock_upstream.url.rsplit(":", 1)[1].split("/")[0])
    shed_before = topo.a.log().count("shedding connections")
    idle = _worker_state(pids, mock_port)
    rounds, after = [], []
    for seed, seconds in enumerate((SECONDS, SECOND_ROUND)):
        rounds.append(_round(topo, pids, seconds, seed))
        after.append(_settle(pids, mock_port, mock_upstream, idle, after[0] if after else None))
    outcomes = rounds[0]["outcomes"] + rounds[1]["outcomes"]
    # A connection the client gave up on after 30 s (a machine this loaded can leave it in the
    # accept queue that long) is counted, not failed; a wrong answer fails.
    bad = {k: v for k, v in outcomes.items() if not k.endswith((":ok", ":aborted", ":TimeoutError"))}
    timed_out = [sum(v for k, v in r["outcomes"].items() if k.endswith(":TimeoutError")) for r in rounds]
    first, last = after
    shed = topo.a.log().count("shedding connections") - shed_before
    FIGURES[
        f"Connection churn: {CONCURRENT} clients against instance a for {SECONDS:.0f} s, then {SECOND_ROUND:.0f} s"
    ] = {
        "connections (round 1, round 2)": [sum(r["outcomes"].values()) for r in rounds],
        "requests sent whole (round 1, round 2; the rest were abandoned)": [r["requests"] for r in rounds],
        "outcomes": dict(sorted(outcomes.items())),
        "client connections open at once, round 1 (min / median after ramp-up, max)": rounds[0]["open"],
        "client connections open at once, round 2": rounds[1]["open"],
        "round wall time (s)": [r["seconds"] for r in rounds],
        "connections the client gave up on after 30 s (round 1, round 2)": timed_out,
        "accepted by the gateway at once (sum of the workers' peak fds, round 1, round 2)": [
            sum(r["fd_peak"].values()) for r in rounds
        ],
        "per-worker cap (GATEWAY_CLIENT_MAX_CONNECTIONS)": topo.env.get("GATEWAY_CLIENT_MAX_CONNECTIONS"),
        "shedding log lines (connections over the cap)": shed,
        **_per_worker(pids, "peak fds in round 1 / round 2", lambda p: [r["fd_peak"][p] for r in rounds]),
        **_per_worker(
            pids, "fds idle / after 1 / after 2", lambda p: [idle[p]["fds"], first[p]["fds"], last[p]["fds"]]
        ),
        **_per_worker(
            pids,
            "upstream connections idle / after 1 / after 2",
            lambda p: [idle[p]["upstream"], first[p]["upstream"], last[p]["upstream"]],
        ),
        **_per_worker(
            pids,
            "RSS MiB idle / after 1 / after 2",
            lambda p: [idle[p]["rss_mib"], first[p]["rss_mib"], last[p]["rss_mib"]],
        ),
        **_per_worker(
            pids,
            "of which C heap and anonymous MiB, idle / after 1 / after 2",
            lambda p: [idle[p]["heap_mib"], first[p]["heap_mib"], last[p]["heap_mib"]],
        ),
        "upstream requests in flight afterwards (mock)": max(0, mock_upstream.stats()["in_flight"] - 1),
    }
    assert sorted(worker_pids(topo.a)) == pids  # no worker died
    assert not bad, bad  # every connection read to its end was answered correctly
    assert shed == 0  # the cap was not what closed connections
    assert rounds[0]["open"][1] >= CONCURRENT * 0.8, rounds[0]["open"]  # the connections were held at once
    for p in pids:
        assert last[p]["fds"] <= first[p]["fds"] + 4, (p, first[p], last[p])  # no fd leak
        assert last[p]["upstream"] <= idle[p]["upstream"] + 2, (p, idle[p], last[p])  # no upstream left open
        assert last[p]["rss_mib"] <= first[p]["rss_mib"] + 4, (p, first[p], last[p])  # no growth per round
        assert last[p]["rss_mib"] <= idle[p]["rss_mib"] + RSS_SLACK_MIB, (p, idle[p], last[p])  # back to idle
    assert mock_upstream.stats()["in_flight"] <= 1
