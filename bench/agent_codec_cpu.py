"""CPU of the 1 MB Claude Code Messages body's way to a Chat upstream, without the network
(issue 20): the steps ``serve``/``build_attempt`` take (``loads_checked``, decode, preparation,
chain, encode, ``orjson.dumps``), each priced alone and all together, in process, process time.

    .venv/bin/python bench/agent_codec_cpu.py [--rounds 15] [--profile]

Used to find and price the codec-side cuts; ``bench/agent_profile.py`` drives the whole ASGI app
against nginx (the upstream POST and the recorders included).
"""

from __future__ import annotations

import argparse
import atexit
import cProfile
import gc
import os
import pstats
import secrets
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path[:0] = [str(BENCH.parent), str(BENCH)]
TMP = Path(tempfile.mkdtemp(prefix="agent-codec-"))
atexit.register(shutil.rmtree, TMP, ignore_errors=True)
os.environ.update(
    {
        "DJANGO_SETTINGS_MODULE": "gateway.settings",
        "GATEWAY_DATA_DIR": str(TMP),
        "DATABASE_URL": f"sqlite:///{TMP / 'db.sqlite3'}",
        "SECRET_KEY": secrets.token_urlsafe(40),
    }
)
os.environ.pop("REDIS_URL", None)

import django  # noqa: E402

django.setup()

import orjson  # noqa: E402
from agent_profile import CASES, build_snapshot  # noqa: E402
from agent_profile import TMP as PROFILE_TMP  # noqa: E402

from gateway.protocols import codec  # noqa: E402
from gateway.protocols.base import EncodeContext  # noqa: E402
from gateway.protocols.json_depth import loads_checked, too_deep  # noqa: E402
from gateway.proxy.attempt import build_attempt  # noqa: E402
from gateway.proxy.chain import TransformContext, run_request, select  # noqa: E402
from gateway.proxy.prepare import prepare_after_chains, prepare_before_chains  # noqa: E402

atexit.register(shutil.rmtree, PROFILE_TMP, ignore_errors=True)  # made when agent_profile is imported


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--inner", type=int, default=5)
    p.add_argument("--case", default="messages-to-chat", choices=list(CASES))
    p.add_argument("--profile", action="store_true")
    args = p.parse_args()
    _path, factory, logical, client, _h = CASES[args.case]
    snap = build_snapshot(1)
    route = snap.routes[logical][0]
    provider, (channel, upstream_model) = route.provider, route.channels[0]
    key = next(iter(snap.keys_by_hash.values()))
    raw = orjson.dumps(factory(logical))
    ccodec, ucodec = codec(client), codec(channel.protocol)

    def whole() -> bytes:
        _status, body = loads_checked(raw)
        req = ccodec.decode_request(body)
        att = build_attempt(
            req,
            snapshot=snap,
            key=key,
            provider=provider,
            channel=channel,
            upstream_model=upstream_model,
            logical_model=logical,
            client_protocol=client,
            client_stream=False,
        )
        return att.raw

    gc.collect()
    gc.freeze()
    times: dict[str, list[float]] = {}

    def timed(name: str, fn: Callable[[], Any]) -> Any:
        t = time.process_time()
        out = fn()
        times.setdefault(name, []).append((time.process_time() - t) * 1000)
        return out

    whole()
    for _ in range(args.rounds):
        t = time.process_time()
        for _ in range(args.inner):
            whole()
        times.setdefault("WHOLE (loads_checked .. dumps)", []).append(
            (time.process_time() - t) * 1000 / args.inner
        )
        body = timed("orjson.loads", lambda: orjson.loads(raw))
        # The first orjson.dumps of a freshly parsed non-ASCII string fills its UTF-8 cache
        # (CPython's encoder, ~1 ns per character); the upstream dumps then reuses it.
        timed("depth check (walk + UTF-8 cache fill)", lambda body=body: too_deep(body, raw))
        timed("depth check again (walk only)", lambda body=body: too_deep(body, raw))
        req = timed("decode_request", lambda body=body: ccodec.decode_request(body))
        req.model = upstream_model
        timed(
            "prepare_before_chains",
            lambda req=req: prepare_before_chains(
                req,
                upstream_protocol=channel.protocol,
                source_protocol=client,
                strip_nested=True,
                extra_whitelist=None,
            ),
        )
        tctx = TransformContext(
            logical_model=logical,
            client_protocol=client,
            upstream_protocol=channel.protocol,
            upstream_model=upstream_model,
            provider=provider.name,
            api_key_id=1,
            username=None,
            stream=False,
        )
        timed(
            "request chain",
            lambda req=req, tctx=tctx: run_request(select([provider.chain], "request", logical), req, tctx),
        )
        timed(
            "prepare_after_chains",
            lambda req=req: prepare_after_chains(
                req, upstream_protocol=channel.protocol, source_protocol=client
            ),
        )
        out = timed(
            "encode_request",
            lambda req=req: ucodec.encode_request(
                req, EncodeContext(model=upstream_model, source_protocol=client, strip_nested=True)
            ),
        )
        timed("orjson.dumps (upstream; UTF-8 cached)", lambda out=out: orjson.dumps(out))
    print(f"{args.case}: {len(raw):,} B in, {len(whole()):,} B out; CPU ms, median of {args.rounds}")
    for k, v in times.items():
        print(f"  {k:40s} {statistics.median(v):6.2f}  (min {min(v):.2f})")
    if args.profile:
        prof = cProfile.Profile()
        gc.disable()
        prof.enable()
        for _ in range(20):
            whole()
        prof.disable()
        gc.enable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(30)


if __name__ == "__main__":
    main()
