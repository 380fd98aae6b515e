"""Family: what the server does with many connections (issue 20), as phases, not wrk cases.

- ``many-streams``: ``--many-streams`` (1,000) concurrent paced Chat streams, direct then through
  the gateway (``harness.many_streams``): errors, added first-byte p99, the workers' RSS during and
  back to idle after. Its own paced server on ``bench.ports["many"]`` (provider
  ``bench-stream-many``), started for the phase only.
- ``worker-split``: how 64 client connections land on the gateway's workers (``ss -tnp``
  mid-run, ``--runs`` short wrk runs of Chat -> Chat): the gateway is started by
  ``gateway.launch`` (one SO_REUSEPORT socket per worker), which the kernel balances; a plain
  ``uvicorn --workers`` shares one socket and can split 58 / 6.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from . import many_streams, payloads, procs, servers, wrk

if TYPE_CHECKING:  # pragma: no cover
    from run import Bench

SPLIT_SECONDS = 4.0


def define(b: Bench) -> None:
    """No wrk cases: both measurements are phases."""


def estimate_seconds(b: Bench) -> float:
    a = b.args
    many = 0.0
    if a.many_streams > 0 and b.want("many-streams"):
        many = 2 * (a.many_ramp + a.many_deltas * a.many_interval_ms / 1000) + 90 + 10
    split = a.runs * (SPLIT_SECONDS + 2) if b.want("worker-split") else 0.0
    return many + split


def run_phase(b: Bench) -> None:
    if b.want("worker-split"):
        worker_split(b)
    if b.args.many_streams > 0 and b.want("many-streams"):
        run_many(b)


def worker_split(b: Bench) -> None:
    from diagnose_tail import connection_split  # bench/ is on sys.path (run.py)

    conns = b.args.connections
    script = wrk.write_script(
        b.workdir / "split.lua",
        [
            wrk.WrkRequest(
                "/v1/chat/completions",
                b.body("gw-split", payloads.chat_body("bench-chat")),
                {"authorization": f"Bearer {servers.PLAIN_KEY}"},
            )
        ],
    )
    splits: list[list[int]] = []
    for _ in range(b.args.runs):
        seen: dict[int, int] = {}
        timer = threading.Timer(
            SPLIT_SECONDS / 2, lambda s=seen: s.update(connection_split(b.ports["gateway"]))
        )
        timer.start()
        wrk.run(b.ports["gateway"], script, connections=conns, seconds=SPLIT_SECONDS)
        timer.join()
        counts = sorted(seen.values(), reverse=True)
        counts += [0] * max(0, b.args.workers - len(counts))
        splits.append(counts)
    b.extra["worker_split"] = splits
    worst = max(splits, key=lambda c: c[0] if c else 0)
    share = worst[0] / sum(worst) if sum(worst) else 1.0
    fair = 1 / max(1, b.args.workers)
    text = ", ".join(" / ".join(map(str, c)) for c in splits) + f" (busiest worker {share:.0%} at worst)"
    b.figures["worker-split"] = (text, share <= fair + 0.15)


def run_many(b: Bench) -> None:
    a = b.args
    many_streams.raise_nofile()
    paced = many_streams.start_paced(b.ports["many"], a.many_deltas, a.many_interval_ms)
    try:
        res = many_streams.run(
            gateway_master=b.gateway.proc.pid,
            gateway_port=b.ports["gateway"],
            paced_port=b.ports["many"],
            path="/v1/chat/completions",
            gw_body=payloads.dumps(payloads.chat_body("bench-stream-many", stream=True)),
            direct_body=payloads.dumps(payloads.chat_body("bench-model", stream=True)),
            gw_headers={"authorization": f"Bearer {servers.PLAIN_KEY}"},
            direct_headers={"authorization": f"Bearer {servers.UPSTREAM_KEY}"},
            streams=a.many_streams,
            ramp=a.many_ramp,
            stream_seconds=a.many_deltas * a.many_interval_ms / 1000,
        )
    finally:
        procs.stop(paced)
    b.many = res
    b.extra["many_streams"] = res
    errors = sum(res["gateway"]["errors"].values())
    p99 = res["added_first_p99"]
    b.figures["streams-1000-first-p99"] = (
        f"{'n/a' if p99 is None else f'{p99:.2f}'} ms, {errors} errors of {res['streams']}",
        p99 is not None and p99 <= 5 and errors == 0,
    )
    idle, peak = sum(res["rss_idle"]), sum(res["rss_peak"] or [0.0])
    back = res["rss_after"] <= idle + max(5.0, idle * 0.05)
    b.figures["streams-1000-rss"] = (
        f"peak {peak:.1f} MB; idle {idle:.1f} → after {res['rss_after']:.1f} MB "
        f"({res['rss_settle_seconds']:.0f} s later)",
        peak <= 300 and back,
    )
