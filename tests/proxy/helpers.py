"""Test helpers for the proxy: snapshots built in memory, an ASGI driver, and a small aiohttp
upstream whose behaviour is chosen by the first path segment of the channel's base URL."""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from dataclasses import dataclass, field

import orjson
from aiohttp import web

from gateway.crypto import hash_api_key
from gateway.proxy.snapshot import ChannelSnap, KeySnap, ProviderSnap, Route, SettingsSnap, Snapshot

SECRET = "sk-test-secret-0001"


def channel(
    cid: int,
    *,
    base_url: str,
    models: dict[str, str],
    weight: int = 1,
    provider_id: int = 1,
    protocol: str = "chat_completion",
    name: str | None = None,
    api_key: str = "upstream-key-123",
    extra_headers: tuple = (),
) -> ChannelSnap:
    return ChannelSnap(
        id=cid,
        name=name or f"ch{cid}",
        provider_id=provider_id,
        protocol=protocol,
        base_url=base_url,
        api_key=api_key,
        weight=weight,
        extra_headers=extra_headers,
        models=models,
    )


def provider(
    pid: int,
    channels: list[ChannelSnap],
    *,
    priority: int = 0,
    max_retries: int = -1,
    channel_max_retries: int = 0,
    breaker: bool = True,
    chain: tuple = (),
    name: str | None = None,
) -> ProviderSnap:
    return ProviderSnap(
        id=pid,
        name=name or f"p{pid}",
        priority=priority,
        max_retries=max_retries,
        channel_max_retries=channel_max_retries,
        channel_retry_interval_ms=0,
        request_timeout=None,
        circuit_breaker_enabled=breaker,
        strip_nested=None,
        extra_fields_whitelist=None,
        chain=chain,
        channels=tuple(channels),
    )


def key(
    *,
    kid: int = 1,
    allowed: tuple | None = None,
    redirects: tuple = (),
    chain: tuple = (),
    capture_mode: str = "off",
    enabled: bool = True,
    expires_at: float | None = None,
) -> KeySnap:
    return KeySnap(
        id=kid,
        name=f"key{kid}",
        enabled=enabled,
        expires_at=expires_at,
        allowed_models=allowed,
        redirects=tuple((re.compile(p), r) for p, r in redirects),
        capture_mode=capture_mode,
        chain=chain,
    )


def snapshot(
    providers: list[ProviderSnap],
    keys: dict[str, KeySnap] | None = None,
    *,
    global_chain: tuple = (),
    settings: SettingsSnap | None = None,
    version: int = 7,
) -> Snapshot:
    routes: dict[str, list[Route]] = {}
    for p in sorted(providers, key=lambda p: (p.priority, p.id)):
        per: dict[str, list] = {}
        for ch in p.channels:
            if ch.weight <= 0:
                continue
            for logical, upstream in ch.models.items():
                per.setdefault(logical, []).append((ch, upstream))
        for logical, pairs in per.items():
            routes.setdefault(logical, []).append(Route(provider=p, channels=tuple(pairs)))
    if keys is None:
        keys = {hash_api_key(SECRET): key()}
    return Snapshot(
        version=version,
        redis_version=0,
        built_at=0.0,
        keys_by_hash=keys,
        providers=tuple(sorted(providers, key=lambda p: (p.priority, p.id))),
        global_chain=tuple(global_chain),
        settings=settings or SettingsSnap(request_timeout=10.0),
        routes={m: tuple(r) for m, r in routes.items()},
    )


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes
    chunks: list[bytes] = field(default_factory=list)

    def json(self):
        return orjson.loads(self.body)


async def call(
    app,
    method: str,
    path: str,
    body: bytes | dict | None = None,
    *,
    headers: dict | None = None,
    query: bytes = b"",
    secret: str | None = SECRET,
    disconnect_after: int | None = None,
) -> Reply:
    """Drive the ASGI app like a server would. ``disconnect_after``: report a client disconnect
    once that many body chunks were received."""
    if isinstance(body, dict):
        body = orjson.dumps(body)
    hdrs = [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    if secret is not None:
        hdrs.append((b"authorization", f"Bearer {secret}".encode()))
    if body is not None:
        hdrs.append((b"content-length", str(len(body)).encode()))
    scope = {
        "type": "http",
        "method": method,
        "path": path,
        "query_string": query,
        "headers": hdrs,
        "http_version": "1.1",
        "scheme": "http",
        "server": ("127.0.0.1", 80),
        "client": ("127.0.0.1", 5),
    }
    sent_body = False
    gone = asyncio.Event()
    out = Reply(status=0, headers={}, body=b"")

    async def receive():
        nonlocal sent_body
        if not sent_body:
            sent_body = True
            return {"type": "http.request", "body": body or b"", "more_body": False}
        await gone.wait()
        return {"type": "http.disconnect"}

    async def send(message):
        if message["type"] == "http.response.start":
            out.status = message["status"]
            out.headers = {k.decode(): v.decode() for k, v in message["headers"]}
        elif message["type"] == "http.response.body":
            if message.get("body"):
                out.chunks.append(message["body"])
            if disconnect_after is not None and len(out.chunks) >= disconnect_after:
                gone.set()
            if not message.get("more_body"):
                gone.set()

    await app(scope, receive, send)
    out.body = b"".join(out.chunks)
    return out


def sse_events(raw: bytes) -> list[str]:
    """The data payloads of an SSE body (comments dropped)."""
    out = []
    for block in raw.decode().split("\n\n"):
        for line in block.split("\n"):
            if line.startswith("data: "):
                out.append(line[6:])
    return out


def chat_completion(content: str, model: str = "up") -> dict:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": model,
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
    }


def chat_chunks(content_parts: list[str], model: str = "up") -> list[bytes]:
    base = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": model}
    out = [
        {
            **base,
            "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}],
        }
    ]
    for part in content_parts:
        out.append({**base, "choices": [{"index": 0, "delta": {"content": part}, "finish_reason": None}]})
    out.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    out.append(
        {**base, "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}}
    )
    return [b"data: " + orjson.dumps(o) + b"\n\n" for o in out] + [b"data: [DONE]\n\n"]


class FakeUpstream:
    """Behaviour by the first path segment: ``ok`` answers (echoing the last user message),
    ``s500``/``s429``/``s400`` fail with that status, ``hang`` streams one chunk and then waits
    until the client goes away (recording that it noticed), ``flaky429`` fails with 429 once then
    succeeds."""

    def __init__(self) -> None:
        self.hits: Counter[str] = Counter()
        self.bodies: list[dict] = []
        self.raw_bodies: list[bytes] = []  # the bytes as sent, for byte-for-byte comparisons
        self.headers: list[dict] = []
        self.hang_closed = asyncio.Event()
        self.runner: web.AppRunner | None = None
        self.port = 0

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/{mode}/v1/chat/completions", self.handle)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()

    async def handle(self, request: web.Request) -> web.StreamResponse:
        mode = request.match_info["mode"]
        self.hits[mode] += 1
        self.raw_bodies.append(await request.read())
        body = await request.json()
        self.bodies.append(body)
        self.headers.append(dict(request.headers))
        last = body["messages"][-1]["content"]
        text = last if isinstance(last, str) else "".join(p.get("text", "") for p in last)
        if mode.startswith("s") and mode[1:].isdigit():
            return web.json_response(
                {
                    "error": {
                        "message": "boom at https://internal.example.com/x key sk-abcdefghijklmnop",
                        "type": "server_error",
                        "code": "boom",
                    }
                },
                status=int(mode[1:]),
            )
        if mode == "flaky429" and self.hits[mode] == 1:
            return web.json_response(
                {"error": {"message": "slow down", "code": "rate_limit_exceeded"}}, status=429
            )
        if mode.startswith("slow"):  # think for a while before answering (keep-alive tests)
            await asyncio.sleep(0.4)
            if mode == "slow500":
                return web.json_response({"error": {"message": "late failure"}}, status=500)
        if mode == "silent":  # one chunk, then nothing until the gateway gives up
            resp = web.StreamResponse(headers={"content-type": "text/event-stream"})
            await resp.prepare(request)
            chunks = chat_chunks(["first"])
            await resp.write(chunks[0] + chunks[1])
            await asyncio.sleep(1.5)
            return resp
        if mode == "hang":
            resp = web.StreamResponse(headers={"content-type": "text/event-stream"})
            await resp.prepare(request)
            chunks = chat_chunks(["first"])
            await resp.write(chunks[0] + chunks[1])
            try:
                for _ in range(600):  # until the gateway drops the connection (at most 30 s)
                    await asyncio.sleep(0.05)
                    await resp.write(b": still here\n\n")
            except (ConnectionError, RuntimeError, asyncio.CancelledError):
                self.hang_closed.set()
            return resp
        if body.get("stream"):
            resp = web.StreamResponse(headers={"content-type": "text/event-stream"})
            await resp.prepare(request)
            for chunk in chat_chunks(["echo: ", text]):
                await resp.write(chunk)
            await resp.write_eof()
            return resp
        return web.json_response(chat_completion(f"echo: {text}", body.get("model", "")))


async def serve_post(handler) -> tuple[object, int]:
    """An aiohttp web server on a free loopback port answering every POST with ``handler``:
    (runner, port); ``await runner.cleanup()`` stops it."""
    from aiohttp import web

    app = web.Application()
    app.router.add_post("/{tail:.*}", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return runner, site._server.sockets[0].getsockname()[1]
