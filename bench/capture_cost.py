"""Where capture CPU goes: the recorder hooks on the request path vs the writer.

    .venv/bin/python bench/capture_cost.py [--requests 2000] [--chain] [--profile]

In one process (no HTTP server in front: the ASGI app is driven directly, the upstream is a small
aiohttp server in the same loop, as in ``tests/proxy``): N Chat -> Chat requests with the key's
capture ``off`` and N with ``all`` (the recorder's records collected instead of submitted), CPU
time (``time.process_time``) of each batch; the difference per request is what recording costs
the request path. Then the writer's side on the records collected: ``prepare`` (dump, masking,
compression) per capture and ``deliver`` (the database insert, in batches of the writer's size)
into a throw-away SQLite database. ``--chain`` adds the bench's five request rules (per-rule
states); ``--profile`` prints the top of a cProfile of the capture-on batch.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import pstats
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def setup_django(data: Path) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gateway.settings")
    os.environ["GATEWAY_DATA_DIR"] = str(data)
    os.environ["DATABASE_URL"] = f"sqlite:///{data / 'cost.sqlite3'}"
    os.environ.pop("REDIS_URL", None)
    os.environ["GATEWAY_ACCESS_LOG_LEVEL"] = "DEBUG"  # no access line per request (not what is measured)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", "--noinput", verbosity=0)


def chain_rules():
    from gateway.proxy.chain import CompiledRule
    from transforms.builtin.field_strip_sampling import FieldStripSampling
    from transforms.builtin.prompt_append_empty_user import PromptAppendEmptyUser
    from transforms.builtin.prompt_inject_system import PromptInjectSystem
    from transforms.builtin.role_developer_to_system import RoleDeveloperToSystem
    from transforms.builtin.role_merge_consecutive import RoleMergeConsecutive

    made = [
        PromptInjectSystem({"content": "Answer briefly.", "position": "append"}),
        RoleMergeConsecutive({}),
        FieldStripSampling({"fields": ["temperature", "top_p"]}),
        PromptAppendEmptyUser({"content": " "}),
        RoleDeveloperToSystem({}),
    ]
    return tuple(CompiledRule(i + 1, "provider", "request", None, t) for i, t in enumerate(made))


async def drive(n: int, mode: str, chain: bool, profile: bool, keep: bool = False) -> tuple[float, list]:
    from captures import recorder as capture_mod
    from gateway.crypto import hash_api_key
    from gateway.live_config import DatabaseConfigSource
    from gateway.proxy.app import ProxyApp
    from gateway.proxy.recorder import RecorderSet
    from gateway.proxy.snapshot import SettingsSnap
    from gateway.wiring import authenticate, proxy_config, recorder_factories
    from tests.proxy.helpers import SECRET, FakeUpstream, call, channel, key, provider, snapshot

    got: list = []
    # The request path only (the writer is timed below); records are kept only when asked, so
    # thousands of live records do not make the timed run's garbage collections dearer.
    capture_mod.sink.submit = got.append if keep else (lambda rec: None)
    up = FakeUpstream()
    await up.start()
    app = ProxyApp(proxy_config(), DatabaseConfigSource(), authenticate, RecorderSet(recorder_factories()))
    app.holder.set(
        snapshot(
            [
                provider(
                    1,
                    [channel(1, base_url=f"{up.base}/ok", models={"m": "m"})],
                    chain=chain_rules() if chain else (),
                )
            ],
            keys={hash_api_key(SECRET): key(capture_mode=mode)},
            settings=SettingsSnap(capture_enabled=True),
        )
    )
    body = {
        "model": "m",
        "messages": [
            {"role": "developer", "content": "Be kind."},
            {"role": "user", "content": "hello benchmark"},
        ],
        "temperature": 0.2,
        "top_p": 0.9,
    }
    try:
        for _ in range(50):
            assert (await call(app, "POST", "/v1/chat/completions", body)).status == 200
        got.clear()
        prof = cProfile.Profile() if profile else None
        t0 = time.process_time()
        if prof:
            prof.enable()
        for _ in range(n):
            await call(app, "POST", "/v1/chat/completions", body)
        if prof:
            prof.disable()
        cpu = time.process_time() - t0
    finally:
        await app.client.close()
        await up.stop()
    if prof:
        pstats.Stats(prof).sort_stats("tottime").print_stats(r"captures|recorder|serialize|bounds|record", 30)
    return cpu, got


PROFILE_WRITER = "--profile-writer" in sys.argv


async def record_calls(chain: bool) -> list:
    """The capture recorder's factory and hook calls of one request, with their real arguments."""
    from captures import recorder as capture_mod

    calls: list = []
    real = capture_mod.capture_recorder

    class Spy:
        def __init__(self, inner):
            self.inner = inner

        def __getattr__(self, name):
            target = getattr(self.inner, name)
            if not callable(target):
                return target

            def hook(*args):
                if name == "on_request_decoded":  # the call is changed later (its req handed on)
                    c = args[0]
                    calls.append(
                        (
                            name,
                            (
                                SimpleNamespace(
                                    client_stream=c.client_stream,
                                    logical_model=c.logical_model,
                                    req=SimpleNamespace(model=c.req.model),
                                ),
                            ),
                        )
                    )
                else:
                    calls.append((name, args))
                out = target(*args)
                return self if name == "rule_trace" and out is not None else out

            return hook

    def factory(ex, snapshot, key, raw_body):
        calls.append(("factory", (ex, snapshot, key, raw_body)))
        rec = real(ex, snapshot, key, raw_body)
        return None if rec is None else Spy(rec)

    capture_mod.capture_recorder = factory
    try:
        await drive(1, "all", chain, False)
    finally:
        capture_mod.capture_recorder = real
    return calls


def hook_cost(calls: list, n: int = 5000) -> float:
    """CPU seconds per request of replaying the capture recorder's calls (the least disturbed of
    five rounds): the recorder's own cost on the request path, without the rest of the pipeline."""
    from captures import recorder as capture_mod

    capture_mod.sink.submit = lambda rec: None
    best = 1e9
    for _ in range(5):
        t0 = time.process_time()
        for _ in range(n):
            rec = None
            for name, args in calls:
                if name == "factory":
                    rec = capture_mod.capture_recorder(*args)
                elif name != "rule_trace":
                    getattr(rec, name)(*args)
        best = min(best, (time.process_time() - t0) / n)
    return best / max(1, sum(1 for name, _ in calls if name == "factory"))


def writer_cost(records: list, rounds: int = 3) -> tuple[float, float]:
    """CPU seconds of the writer's ``prepare`` and ``deliver`` for all ``records``, the least
    disturbed of ``rounds`` rounds (a shared, loaded box); each round prepares its own deep copy
    (``prepare`` materializes a record in place) and delivers under fresh request ids."""
    import copy

    from captures import sink

    w = sink.Writer()
    preps, delivers = [], []
    for n in range(rounds):
        batch = copy.deepcopy(records)
        prof = cProfile.Profile() if PROFILE_WRITER and n == 0 else None
        if prof:
            prof.enable()
        t0 = time.process_time()
        payloads = [w.prepare(r) for r in batch]
        preps.append(time.process_time() - t0)
        if prof:
            prof.disable()
            pstats.Stats(prof).sort_stats("tottime").print_stats(20)
            preps.pop()  # the profiler's own overhead is not the writer's
        payloads = [({**meta, "request_id": f"{meta['request_id']}-{n}"}, blob) for meta, blob in payloads]
        t0 = time.perf_counter()
        c0 = time.process_time()
        for i in range(0, len(payloads), w.batch_max):
            w.deliver(payloads[i : i + w.batch_max])
        delivers.append(time.process_time() - c0)
        print(f"  deliver wall {(time.perf_counter() - t0) * 1000 / len(records):.3f} ms/capture")
    return min(preps or [float("nan")]), min(delivers)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--requests", type=int, default=2000)
    p.add_argument("--chain", action="store_true")
    p.add_argument("--profile", action="store_true")
    p.add_argument("--profile-writer", action="store_true", help="a cProfile of the writer's prepare step")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        setup_django(Path(tmp))
        offs, ons = [], []
        for _ in range(5):  # interleaved: drift on a shared box hits both alike
            offs.append(asyncio.run(drive(args.requests, "off", args.chain, False))[0])
            ons.append(asyncio.run(drive(args.requests, "all", args.chain, args.profile))[0])
        off, on = min(offs), min(ons)  # the least disturbed batch of each (a shared, loaded box)
        _, records = asyncio.run(drive(args.requests, "all", args.chain, False, keep=True))
        calls = asyncio.run(record_calls(args.chain))
        print(f"capture recorder alone (its calls replayed): {hook_cost(calls, 500) * 1e6:.1f} us/request")
        n = args.requests
        print(
            f"request path: capture off {off * 1000 / n:.3f} ms/req, on {on * 1000 / n:.3f} ms/req, "
            f"recording {(on - off) * 1000 / n:.3f} ms/req ({len(records)} records)"
        )
        prep, deliver = writer_cost(records)
        print(
            f"writer: prepare {prep * 1000 / n:.3f} ms/capture, deliver {deliver * 1000 / n:.3f} ms/capture "
            f"-> {n / (prep + deliver):.0f} captures/s of CPU"
        )


if __name__ == "__main__":
    main()
