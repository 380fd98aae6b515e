"""Where the time goes for agent-sized requests (issue 20): the 1 MB Claude Code Messages body to
a Chat upstream, and the 1 MB Codex Responses body to a Responses and to a Chat upstream.

The real ASGI proxy app (``ProxyApp`` with the production recorders: observe, captures off,
request logs on) is driven in this process, like a server would, against nginx answering canned
JSON in its own process (the request-log writer thread is not started: its rows queue up, and
its SQLite inserts are not in these figures; they are in ``make bench``'s). Four measurements
per case:

- **CPU ms per request**: ``time.process_time()`` over ``--requests`` whole requests (the
  driver's own share is a dict and a few awaits per request). Process CPU time, not wall clock,
  so the shared box does not distort it.
- **stages**: the pipeline's steps run one at a time on the same body, CPU ms each: the stream
  sniff, orjson parse, depth check, decode to URP, preparation (before/after chains), the request
  chain, encode, orjson dumps, the upstream POST (aiohttp writing 1 MB and reading the canned
  answer).
- **garbage collection**: the collector's share of that CPU time (``gc.callbacks``);
- **profile**: cProfile over the whole requests with the collector off (its pauses would be
  charged to whichever line happened to allocate), the top functions by own time.

    .venv/bin/python bench/agent_profile.py [--requests 40] [--out bench/out/agent_profile.txt]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import io
import os
import pstats
import secrets
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path[:0] = [str(ROOT), str(BENCH)]
TMP = Path(tempfile.mkdtemp(prefix="agent-profile-"))
os.environ.update(
    {
        "DJANGO_SETTINGS_MODULE": "gateway.settings",
        "GATEWAY_DATA_DIR": str(TMP),
        "DATABASE_URL": f"sqlite:///{TMP / 'db.sqlite3'}",
        "SECRET_KEY": secrets.token_urlsafe(40),
        "LOG_LEVEL": "WARNING",
        "GATEWAY_LOG_LEVEL": "WARNING",
    }
)
for _name in ("REDIS_URL", "PYTHONTRACEMALLOC", "PYTHONDEVMODE"):
    os.environ.pop(_name, None)

import django  # noqa: E402

django.setup()

import orjson  # noqa: E402
from harness import agent_payloads, nginx_mock, procs  # noqa: E402

from gateway.crypto import hash_api_key  # noqa: E402
from gateway.live_config import DatabaseConfigSource  # noqa: E402
from gateway.protocols import codec  # noqa: E402
from gateway.protocols.json_depth import too_deep  # noqa: E402
from gateway.proxy.app import ProxyApp  # noqa: E402
from gateway.proxy.attempt import build_attempt  # noqa: E402
from gateway.proxy.chain import CompiledRule, TransformContext, run_request, select  # noqa: E402
from gateway.proxy.prepare import prepare_after_chains, prepare_before_chains  # noqa: E402
from gateway.proxy.recorder import RecorderSet  # noqa: E402
from gateway.proxy.snapshot import ChannelSnap, KeySnap, ProviderSnap, Route, SettingsSnap, Snapshot  # noqa: E402
from gateway.wiring import authenticate, proxy_config, recorder_factories  # noqa: E402
from transforms.registry import registry  # noqa: E402

SECRET = "sk-agent-profile-0001"
ANTHROPIC = {"anthropic-version": "2023-06-01"}


def _rule(type_id: str, config: dict[str, Any]) -> CompiledRule:
    return CompiledRule(
        rule_id=1, scope="provider", phase="request", models=None, transform=registry.get(type_id)(config)
    )


def build_snapshot(nginx_port: int) -> Snapshot:
    base = f"http://127.0.0.1:{nginx_port}/v1"
    custom = (_rule("field_custom_tools_to_function", {"names": ["*"]}),)
    providers = []
    for pid, (name, protocol, chain) in enumerate(
        (
            ("agent-chat", "chat_completion", ()),
            ("agent-responses", "responses", ()),
            ("agent-codex-chat", "chat_completion", custom),
        ),
        start=1,
    ):
        ch = ChannelSnap(
            id=pid,
            name="main",
            provider_id=pid,
            protocol=protocol,
            base_url=base,
            api_key="sk-up",
            weight=1,
            extra_headers=(),
            models={name: "bench-model"},
        )
        providers.append(
            ProviderSnap(
                id=pid,
                name=name,
                priority=0,
                max_retries=-1,
                channel_max_retries=0,
                channel_retry_interval_ms=0,
                request_timeout=None,
                circuit_breaker_enabled=True,
                strip_nested=None,
                extra_fields_whitelist=None,
                chain=chain,
                channels=(ch,),
            )
        )
    key = KeySnap(
        id=1,
        name="agent",
        enabled=True,
        expires_at=None,
        allowed_models=None,
        redirects=(),
        capture_mode="off",
        chain=(),
    )
    routes = {
        p.channels[0].name and next(iter(p.channels[0].models)): (
            Route(provider=p, channels=((p.channels[0], "bench-model"),)),
        )
        for p in providers
    }
    return Snapshot(
        version=1,
        redis_version=0,
        built_at=0.0,
        keys_by_hash={hash_api_key(SECRET): key},
        providers=tuple(providers),
        global_chain=(),
        settings=SettingsSnap(request_timeout=30.0),
        routes=routes,
    )


CASES = {  # key: (client path, body factory, logical model, client protocol, headers)
    "messages-to-chat": (
        "/v1/messages",
        agent_payloads.claude_code_messages_body,
        "agent-chat",
        "messages",
        {"x-api-key": SECRET, **ANTHROPIC},
    ),
    "responses-to-responses": (
        "/v1/responses",
        agent_payloads.codex_responses_body,
        "agent-responses",
        "responses",
        {"authorization": f"Bearer {SECRET}"},
    ),
    "responses-to-chat": (
        "/v1/responses",
        agent_payloads.codex_responses_body,
        "agent-codex-chat",
        "responses",
        {"authorization": f"Bearer {SECRET}"},
    ),
}


class GcClock:
    """Time spent in the cyclic garbage collector (``gc.callbacks``), all generations."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.runs = 0
        self._t = 0.0
        gc.callbacks.append(self._hook)

    def reset(self) -> None:
        self.seconds, self.runs = 0.0, 0

    def _hook(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._t = time.process_time()
        else:
            self.seconds += time.process_time() - self._t
            self.runs += 1


gc_clock = GcClock()


async def asgi_call(app: ProxyApp, path: str, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
    hdrs = [(k.encode(), v.encode()) for k, v in headers.items()]
    hdrs += [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    scope = {
        "type": "http",
        "method": "POST",
        "path": path,
        "query_string": b"",
        "headers": hdrs,
        "http_version": "1.1",
        "scheme": "http",
        "server": ("127.0.0.1", 80),
        "client": ("127.0.0.1", 5),
    }
    status, chunks, sent = 0, [], False
    done = asyncio.Event()

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await done.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                done.set()

    await app(scope, receive, send)
    return status, b"".join(chunks)


def stage_times(app: ProxyApp, snap: Snapshot, case: str, raw: bytes, n: int) -> dict[str, float]:
    """CPU ms of each step the pipeline takes for this body (median over ``n`` rounds)."""
    _path, _factory, logical, client, _headers = CASES[case]
    route = snap.routes[logical][0]
    provider, (channel, upstream_model) = route.provider, route.channels[0]
    key = next(iter(snap.keys_by_hash.values()))
    ccodec = codec(client)
    times: dict[str, list[float]] = {}

    def timed(name: str, fn: Callable[[], Any]) -> Any:
        t = time.process_time()
        out = fn()
        times.setdefault(name, []).append((time.process_time() - t) * 1000)
        return out

    for _ in range(n):
        timed("stream sniff (app.py)", lambda: raw.rfind(b'"stream"') >= 0)
        body = timed("orjson.loads (client body)", lambda: orjson.loads(raw))
        timed("depth check (too_deep)", lambda body=body: too_deep(body, raw))
        req = timed("decode_request -> URP", lambda body=body: ccodec.decode_request(body))
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
        from gateway.protocols.base import EncodeContext

        out = timed(
            "encode_request (URP -> upstream)",
            lambda req=req: codec(channel.protocol).encode_request(
                req, EncodeContext(model=upstream_model, source_protocol=client, strip_nested=True)
            ),
        )
        timed("orjson.dumps (upstream body)", lambda out=out: orjson.dumps(out))
        timed(
            "build_attempt (all of the above after decode)",
            lambda: build_attempt(
                ccodec.decode_request(orjson.loads(raw)),
                snapshot=snap,
                key=key,
                provider=provider,
                channel=channel,
                upstream_model=upstream_model,
                logical_model=logical,
                client_protocol=client,
                client_stream=False,
            ),
        )
    times["build_attempt (all of the above after decode)"] = [
        a - b - c
        for a, b, c in zip(
            times["build_attempt (all of the above after decode)"],
            times["orjson.loads (client body)"],
            times["decode_request -> URP"],
            strict=True,
        )
    ]
    return {k: statistics.median(v) for k, v in times.items()}


async def upstream_post_ms(app: ProxyApp, nginx_port: int, raw_up: bytes, n: int) -> float:
    """CPU ms of the upstream POST alone (aiohttp: 1 MB out, the canned answer in)."""
    url = f"http://127.0.0.1:{nginx_port}/v1/chat/completions"
    headers = {"content-type": "application/json", "authorization": "Bearer sk-up"}
    out = []
    for _ in range(n):
        t = time.process_time()
        async with app.client.post(url, raw_up, headers, total=30, connect=5, sock_read=None) as resp:
            await resp.read()
        out.append((time.process_time() - t) * 1000)
    return statistics.median(out)


async def main_async(args: argparse.Namespace) -> str:
    port = procs.free_port()
    nginx = nginx_mock.start(TMP, port)
    lines: list[str] = []
    try:
        snap = build_snapshot(port)
        app = ProxyApp(
            proxy_config(), DatabaseConfigSource(), authenticate, RecorderSet(recorder_factories())
        )
        app.holder.set(snap)
        await app.client.start()
        gc.collect()
        gc.freeze()  # as ProxyApp.startup does: start-up objects out of the collector's reach
        if args.gc_threshold:
            gc.set_threshold(*args.gc_threshold)
        for case, (path, factory, logical, _client, headers) in CASES.items():
            if args.only and case not in args.only:
                continue
            raw = orjson.dumps(factory(logical))
            status, answer = await asgi_call(app, path, raw, headers)
            assert status == 200 and b"Echo: hello benchmark" in answer, (case, status, answer[:500])
            for _ in range(3):
                await asgi_call(app, path, raw, headers)
            per: list[float] = []
            gc_clock.reset()
            for _ in range(args.rounds):
                t = time.process_time()
                for _ in range(args.requests):
                    await asgi_call(app, path, raw, headers)
                per.append((time.process_time() - t) * 1000 / args.requests)
            n = args.rounds * args.requests
            lines.append(f"## {case}: {len(raw):,} bytes")
            lines.append(
                f"CPU ms per request (process time, {args.rounds} rounds of {args.requests}): median "
                f"{statistics.median(per):.2f}, min {min(per):.2f}, max {max(per):.2f}; of which "
                f"garbage collection {gc_clock.seconds * 1000 / n:.2f} ms "
                f"({gc_clock.runs / n:.1f} collections per request)"
            )
            stages = stage_times(app, snap, case, raw, args.stage_rounds)
            route = snap.routes[logical][0]
            req = codec(_client).decode_request(orjson.loads(raw))
            att = build_attempt(
                req,
                snapshot=snap,
                key=next(iter(snap.keys_by_hash.values())),
                provider=route.provider,
                channel=route.channels[0][0],
                upstream_model="bench-model",
                logical_model=logical,
                client_protocol=_client,
                client_stream=False,
            )
            stages["upstream POST (aiohttp, 1 MB out)"] = await upstream_post_ms(
                app, port, att.raw, args.stage_rounds
            )
            lines.append(f"upstream body: {len(att.raw):,} bytes")
            lines.append("| stage | CPU ms (median) |\n| --- | ---: |")
            lines += [f"| {k} | {v:.2f} |" for k, v in stages.items()]
            prof = cProfile.Profile()
            gc.disable()  # the collector's pauses land on whatever line allocates: priced above instead
            prof.enable()
            for _ in range(args.profile_requests):
                await asgi_call(app, path, raw, headers)
            prof.disable()
            gc.enable()
            buf = io.StringIO()
            pstats.Stats(prof, stream=buf).sort_stats(args.sort).print_stats(args.top)
            lines.append(
                f"cProfile, {args.profile_requests} requests, by {args.sort}:\n```\n"
                + "\n".join(buf.getvalue().splitlines()[4:])
                + "\n```"
            )
            print("\n".join(lines[-len(stages) - 6 :]), flush=True)
        await app.client.close()
    finally:
        procs.stop(nginx)
    return "\n".join(lines) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--requests", type=int, default=20)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--stage-rounds", type=int, default=9)
    p.add_argument("--profile-requests", type=int, default=20)
    p.add_argument("--top", type=int, default=30)
    p.add_argument(
        "--gc-threshold",
        type=int,
        nargs=3,
        metavar=("GEN0", "GEN1", "GEN2"),
        help="gc.set_threshold for the run (default: Python's 700 10 10), to price the collector",
    )
    p.add_argument("--sort", default="tottime", help="cProfile order: tottime (own time) or cumulative")
    p.add_argument("--only", nargs="*", choices=list(CASES))
    p.add_argument("--out", default=str(BENCH / "out" / "agent_profile.txt"))
    args = p.parse_args()
    import uvloop  # the production loop (uvicorn --loop uvloop)

    text = uvloop.run(main_async(args))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
