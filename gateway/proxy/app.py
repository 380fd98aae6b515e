"""The ASGI proxy app serving ``/v1/*``, ``/healthz`` (alive) and ``/readyz`` (ready for traffic).

Plain ASGI, no Django request handling: per request it authenticates against the in-process
snapshot, decodes, routes and streams (see ``serve``). No ORM query and no
``sync_to_async`` per request; the snapshot is built and reloaded in a background thread.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import orjson

from gateway.fetch import fetcher
from gateway.images import pool as image_pool

from .affinity import AffinityStore
from .breaker import BreakerBoard, RedisMirror
from .call import Runtime
from .compact import COMPACT_PATH, serve_compact
from .config import Authenticator, ProxyConfig
from .count_tokens import COUNT_TOKENS_PATH, serve_count_tokens
from .embeddings import EMBEDDINGS_PATH, serve_embeddings
from .errors import ClientError
from .exchange import (
    ClientGone,
    DisconnectWatch,
    Exchange,
    client_request_id_from,
    new_request_id,
    read_body,
    read_headers,
)
from .gemini_client import gemini_body, gemini_route, gemini_secret, serve_gemini_count
from .idle_trim import IdleTrim
from .images_api import IMAGES_PATHS, serve_images
from .limits import LocalLimiter, RedisLimiter, client_ip, ip_allowed
from .loopguard import HOP_HEADER, outgoing_hop
from .models_list import models_answer
from .recorder import RecorderSet
from .responses_ws import RESPONSES_WS_PATHS, serve_responses_ws
from .serve import serve
from .snapshot import ConfigSource, KeySnap, Snapshot, SnapshotHolder, changed_channels
from .upstream import UpstreamClient
from .usage_tap import run_limited

log = logging.getLogger("gateway.proxy")
_STREAM_SCAN_LIMIT = 256 * 1024  # bodies above this are not searched for "stream" (_read_and_serve)

GENERATION_PATHS = {
    "/v1/chat/completions": "chat_completion",
    "/v1/responses": "responses",
    "/v1/messages": "messages",
    "/v1/completions": "completions",  # legacy text completions, through the chat pipeline
}
# Non-generation endpoints: path -> (client protocol for the error shape, handler). No capture.
EXTRA_ENDPOINTS = {
    COUNT_TOKENS_PATH: ("messages", serve_count_tokens),
    EMBEDDINGS_PATH: ("chat_completion", serve_embeddings),
    COMPACT_PATH: ("responses", serve_compact),
}
# The Images API answers in OpenAI's shape (see images_api).
PROTOCOL_PATHS = {
    **GENERATION_PATHS,
    **{path: proto for path, (proto, _) in EXTRA_ENDPOINTS.items()},
    **{p: "chat_completion" for p in IMAGES_PATHS},
}
MODELS_PATH = "/v1/models"
_ALIASED = (
    "/chat/completions",
    "/completions",
    "/responses",
    "/responses/compact",
    "/messages",
    "/messages/count_tokens",
    "/embeddings",
    "/models",
    "/images/generations",
    "/images/edits",
)
ALIAS_PATHS = frozenset([*_ALIASED, *("/api" + p for p in _ALIASED)])


def is_proxy_path(path: str) -> bool:
    """Whether the ASGI entry point hands ``path`` to the proxy rather than to Django: ``/v1/*``,
    ``/healthz`` and the aliases (``/api/v1/*``, the forwarding paths without ``/v1``, with or
    without ``/api``). The REST API under ``/api/`` uses none of these names."""
    return (
        path.startswith(("/v1/", "/api/v1/", "/v1beta/"))
        or path in ("/healthz", "/readyz")
        or path in ALIAS_PATHS
        or path.startswith(("/models/", "/api/models/"))
    )


def canonical_path(path: str) -> str:
    """Aliases (reference §6.1, AP1/AP2): every forwarding path also under ``/api`` and without
    the ``/v1`` prefix (``/api/v1/chat/completions``, ``/chat/completions``,
    ``/api/chat/completions``). Called only when the exact path missed, so the common path
    pays one dict lookup and nothing more."""
    if path.startswith("/api/"):
        path = path[4:]
    if not path.startswith(("/v1/", "/v1beta/")) and path != "/v1":
        path = "/v1" + path
    return path


def endpoint_of(path: str, gemini: tuple[str, str] | None) -> str:
    """A bounded name for a path that is not a generation endpoint (metrics labels and the
    request log's ``endpoint``): the Gemini and models paths without their model, ``other`` for
    any unknown path (a client can send any path; it must not grow a label set), and ``""`` for
    the health checks, which are not ``/v1`` answers."""
    if gemini is not None:
        return f"/v1beta/models/{{model}}:{gemini[1]}"
    if path == MODELS_PATH:
        return path
    if path.startswith(MODELS_PATH + "/"):
        return MODELS_PATH + "/{id}"
    if path in ("/healthz", "/readyz"):
        return ""
    return "other"


def _gone(ex: Exchange) -> None:
    """The client left before its answer (while its body was read): recorded as ``client_gone``."""
    ex.client_gone = True
    if not ex.headers_sent:
        ex.status = 499


FIRST_SNAPSHOT_WAIT = 30.0


class ProxyApp:
    """One per worker. ``holder`` owns the configuration snapshot, ``breaker`` the circuit
    state, ``client`` the shared upstream connection pool.

    Everything that depends on the project (where the configuration comes from, how a key is
    authenticated, who records requests) is passed in; ``gateway.wiring.build_proxy_app`` is
    the production assembly."""

    def __init__(
        self,
        config: ProxyConfig,
        source: ConfigSource,
        authenticate: Authenticator,
        recorders: RecorderSet | None = None,
    ) -> None:
        self.config = config
        self.holder = SnapshotHolder(source, config.config_poll_seconds)
        self.authenticate = authenticate
        self.breaker = BreakerBoard(
            threshold=config.breaker_failures,
            window=config.breaker_window_seconds,
            cooldown=config.breaker_cooldown_seconds,
            rate_limit_cooldown=config.breaker_rate_limit_cooldown_seconds,
        )
        self.client = UpstreamClient(ssrf_guard=config.ssrf_guard)
        self._loop: asyncio.AbstractEventLoop | None = None
        self.holder.listeners.append(self._config_changed)
        self.mirror: RedisMirror | None = None
        self.max_body = config.max_body_bytes
        self.large_body_bytes = config.large_body_bytes
        self.watch_delay = 1.0  # seconds before a non-stream request starts watching for a disconnect
        self.large_bodies = (
            asyncio.Semaphore(config.large_body_concurrency) if config.large_body_concurrency > 0 else None
        )
        # Sync callables the project hangs on the worker's lifespan, run in a thread so they never
        # block the loop: at startup the capture writer's spool pick-up (issue 13); at shutdown,
        # after uvicorn has let the in-flight requests finish, the queue flushes (gateway.wiring).
        self.startup_hooks: list[Callable[[], object]] = []
        self.shutdown_hooks: list[Callable[[], object]] = []
        self.draining = False
        self.idle_trim = IdleTrim()  # memory back to the system after a burst (idle_trim.py)
        self._trim_task: asyncio.Task | None = None
        self.runtime = Runtime(
            breaker=self.breaker,
            client=self.client,
            keepalive_seconds=config.keepalive_seconds,
            recorders=recorders or RecorderSet(),
            stream_first_byte_timeout=config.stream_first_byte_timeout,
            stream_idle_timeout=config.stream_idle_timeout,
            stream_max_seconds=config.stream_max_seconds,
            offload_json_bytes=config.offload_json_bytes,
        )
        self.affinity_ready = False

    # -- lifecycle ---------------------------------------------------------------------------------
    def _config_changed(self, old: Snapshot | None, new: Snapshot) -> None:
        """A provider or channel changed: forget its channels' breaker state (here and, through
        the mirror, in the other workers), on the loop's thread."""
        changed = changed_channels(old, new)
        if not changed:
            return

        def clear() -> None:
            for cid in changed:
                self.breaker.record_success(cid)

        loop = self._loop
        if loop is not None and loop.is_running():
            loop.call_soon_threadsafe(clear)
        else:
            clear()

    async def startup(self) -> None:
        loop = asyncio.get_running_loop()
        self._loop = loop
        for hook in self.startup_hooks:
            await loop.run_in_executor(None, hook)
        await self.client.start()
        self.holder.start()
        if self.config.redis_url and isinstance(self.runtime.limiter, LocalLimiter):
            import redis.asyncio as aioredis

            # short timeouts: a Redis outage falls back to per-worker counting, never stalls a request
            self.runtime.limiter = RedisLimiter(
                aioredis.from_url(self.config.redis_url, socket_timeout=0.25, socket_connect_timeout=0.25)
            )
        if self.config.redis_url and self.mirror is None:
            try:
                self.mirror = RedisMirror(self.breaker, self.config.redis_url)
                self.mirror.start()
            except Exception:
                log.warning("breaker state will not be shared: Redis unavailable", exc_info=True)
        self._start_affinity()
        await self._wait_snapshot()
        # Everything Django and the first snapshot allocated at start-up lives as long as the
        # worker: move it out of the collector's reach, so full collections stop scanning it.
        # Measured in bench/TAIL.md: the longest GC pause fell from 65-290 ms to 3-11 ms.
        gc.collect()
        gc.freeze()
        if self.config.gc_gen0_threshold > 0:
            # A young collection comes every 700 net allocations by default, which a worker's
            # requests in flight reach by themselves (each holds a few hundred containers while
            # it runs): about one collection per 20 requests at 64 connections, 3-4 % of a
            # worker. Ten times that leaves them to the objects that outlive their request
            # (bench/TAIL.md, threshold comparison).
            gc.set_threshold(self.config.gc_gen0_threshold, *gc.get_threshold()[1:])
        if self._trim_task is None:
            self._trim_task = loop.create_task(self.idle_trim.run())

    def _start_affinity(self) -> None:
        """Sticky-routing bindings: in Redis when configured (shared by workers), else in memory."""
        if self.affinity_ready:
            return
        self.affinity_ready = True
        try:
            self.runtime.affinity = AffinityStore(self.config.redis_url or None)
        except Exception:
            log.warning("affinity bindings will not be shared: Redis unavailable", exc_info=True)
            self.runtime.affinity = AffinityStore(None)

    def on_shutdown(self, hook: Callable[[], None]) -> None:
        """Register a blocking callable to run once at shutdown (captures: flush the queue)."""
        self.shutdown_hooks.append(hook)

    async def shutdown(self) -> None:
        self.draining = True
        if self._trim_task is not None:
            self._trim_task.cancel()
            self._trim_task = None
        loop = asyncio.get_running_loop()
        for hook in self.shutdown_hooks:
            try:
                await loop.run_in_executor(None, hook)
            except Exception:
                log.exception("shutdown hook %r failed", hook)
        if self.runtime.affinity is not None:
            await self.runtime.affinity.close()
            self.runtime.affinity = None
            self.affinity_ready = False
        await self.runtime.limiter.drain()  # end-of-request settlements still on their way to Redis
        await self.runtime.limiter.aclose()  # its script connection (redis_pipe)
        if self.mirror is not None:
            await self.mirror.stop()
            self.mirror = None
        await self.client.close()
        await fetcher().close()
        image_pool.shutdown()
        await asyncio.get_running_loop().run_in_executor(None, self.holder.stop)

    async def lifespan(self, scope, receive, send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                try:
                    await self.startup()
                except Exception as exc:
                    log.exception("proxy startup failed")
                    await send({"type": "lifespan.startup.failed", "message": str(exc)})
                    return
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                try:
                    await self.shutdown()
                finally:
                    await send({"type": "lifespan.shutdown.complete"})
                return

    async def _wait_snapshot(self) -> Snapshot | None:
        """The current snapshot; on the very first request without lifespan, start the poller
        and wait for its first build (only then does a request touch a thread)."""
        snap = self.holder.current
        if snap is not None:
            return snap
        self._start_affinity()
        self.holder.start()
        await asyncio.get_running_loop().run_in_executor(None, self.holder.ready.wait, FIRST_SNAPSHOT_WAIT)
        return self.holder.current

    # -- requests ------------------------------------------------------------------------------------
    async def __call__(self, scope, receive, send) -> None:
        kind = scope["type"]
        if kind == "http":
            await self._http(scope, receive, send)
        elif kind == "lifespan":
            await self.lifespan(scope, receive, send)
        elif kind == "websocket":
            if scope["path"] in RESPONSES_WS_PATHS:
                await serve_responses_ws(self, scope, receive, send)
            else:
                await send({"type": "websocket.close", "code": 1008})

    def _exchange(self, scope, headers, send, t0: float) -> tuple[Exchange, str, str | None, Any]:
        """The request's exchange, canonical path, client protocol and Gemini route (if any)."""
        path = scope["path"]
        protocol = PROTOCOL_PATHS.get(path)
        gemini = None
        if protocol is None and path not in ("/healthz", "/readyz"):
            path = canonical_path(path)
            protocol = PROTOCOL_PATHS.get(path)
            if protocol is None and (gemini := gemini_route(path)) is not None:
                protocol = "gemini"
                gemini_secret(headers, scope.get("query_string", b""))
        ex = Exchange(send, protocol or "chat_completion", new_request_id(), t0)  # our own identity
        ex.endpoint = path if protocol is not None and gemini is None else endpoint_of(path, gemini)
        ex.client_ip = client_ip(scope, headers, self.config.trusted_proxies)
        ex.client_request_id = client_request_id_from(headers)
        if protocol == "messages":
            ex.anthropic_beta = headers.get("anthropic-beta")
        return ex, path, protocol, gemini

    async def _http(self, scope, receive, send) -> None:
        t0 = time.perf_counter()
        headers = read_headers(scope)
        ex, path, protocol, gemini = self._exchange(scope, headers, send, t0)
        if path == "/readyz":  # never waits for the first snapshot: "not yet" is its answer
            await self._readyz(ex)
            return
        trim = self.idle_trim
        if protocol is not None:  # generation requests: health probes alone do not keep it "busy"
            trim.served += 1
        trim.active += 1
        try:
            await self._answer(scope, receive, ex, headers, path, protocol, gemini)
        finally:
            trim.active -= 1
            if not ex.recorded and ex.endpoint:  # refused before a recorder existed, models, extras
                self.runtime.recorders.finish_unrecorded(ex)

    async def _answer(
        self, scope, receive, ex: Exchange, headers, path: str, protocol: str | None, gemini: Any
    ) -> None:
        try:
            admitted = await self._admit(scope, ex, headers, path, protocol)
        except ClientGone:
            _gone(ex)
            return
        except ClientError as err:
            await ex.send_error(err)
            return
        if admitted is None:
            return
        snapshot, key, gate = admitted
        try:
            await self._read_and_serve(scope, receive, ex, headers, path, gemini, snapshot, key)
        finally:
            if gate is not None:
                gate.release()

    async def _admit(self, scope, ex: Exchange, headers, path: str, protocol: str | None):
        """Snapshot, key and large-body gate for a generation request; None once a non-generation
        path (health, models) has been answered. Raises ClientError for the client's answer."""
        if protocol is not None and self.config.instance_id:
            ex.hop = outgoing_hop(headers.get(HOP_HEADER), self.config.instance_id)
        snapshot = self.holder.current or await self._wait_snapshot()
        if snapshot is None:
            raise ClientError(
                503,
                "gateway_starting",
                "the gateway configuration is not loaded yet",
                error_type="server_error",
            )
        if path == "/healthz":
            await ex.send_json(
                200,
                {"status": "ok", "config_version": snapshot.version, "redis_version": snapshot.redis_version},
            )
            return None
        if protocol is None:
            await self._other(scope, ex, snapshot, headers, path)
            return None
        if scope["method"] != "POST":
            raise ClientError(405, "method_not_allowed", f"{scope['method']} is not allowed on {path}")
        key = self.authenticate(headers, snapshot.keys_by_hash, time.time())
        if key is None:
            raise ClientError(
                401, "unauthorized", "invalid or missing API key", error_type="authentication_error"
            )
        ex.key = key
        self.holder.touch(key.id)
        if key.limits is not None and key.limits.ip_allow and not ip_allowed(key.limits, ex.client_ip):
            raise ClientError(
                403,
                "ip_not_allowed",
                "this API key may not be used from this address",
                error_type="permission_error",
            )
        gate = self._large_body_gate(headers)
        if gate is not None:
            await self._enter(gate)
        return snapshot, key, gate

    async def _read_and_serve(
        self, scope, receive, ex: Exchange, headers, path: str, gemini: Any, snapshot: Snapshot, key: KeySnap
    ) -> None:
        try:
            raw_body = await read_body(receive, self.max_body, headers)
            if gemini is not None:
                raw_body = gemini_body(raw_body, *gemini)
        except ClientGone:
            _gone(ex)
            return
        except ClientError as err:
            await ex.send_error(err)
            return
        if gemini is not None and gemini[1] == "countTokens":
            await self._serve_extra(serve_gemini_count, ex, snapshot, key, raw_body)
            return
        extra = EXTRA_ENDPOINTS.get(path)
        if extra is not None:
            await self._serve_extra(extra[1], ex, snapshot, key, raw_body)
            return
        if path in IMAGES_PATHS:
            await serve_images(
                self.runtime, ex, snapshot, key, raw_body, headers.get("content-type", ""), path
            )
            return
        if len(raw_body) > _STREAM_SCAN_LIMIT or (
            raw_body[:64].lstrip()[:1] == b"{" and raw_body.rfind(b'"stream"') >= 0
        ):
            # Possibly streaming: watch for a client disconnect and cancel the upstream with it.
            # rfind, not ``in``: agents write "stream" last, after a megabyte of history, and a
            # forward search for a needle ending in '"' crawls through JSON (0.4 ms per MB). A
            # body without it is searched to its start (2.3 ms for a 5 MB image request, on the
            # event loop): a large body is watched from the start instead, a task it can afford.
            await self._serve_whole(ex, snapshot, key, raw_body, receive, delay=0.0)
        else:
            await self._serve_whole(ex, snapshot, key, raw_body, receive)

    async def _serve_extra(
        self,
        handler: Callable[..., Awaitable[None]],
        ex: Exchange,
        snapshot: Snapshot,
        key: KeySnap,
        raw_body: bytes,
    ) -> None:
        """An endpoint beside the generation ones (embeddings, count tokens, ...) under the key's
        limits. Its own method: the closure it needs would otherwise make ``_read_and_serve`` build
        six cells on every request, and keep them alive for as long as a stream is open."""
        rt = self.runtime
        await run_limited(rt.limiter, ex, key, lambda: handler(rt, ex, snapshot, key, raw_body))

    def _large_body_gate(self, headers) -> asyncio.Semaphore | None:
        """The semaphore a request must hold while its body is read and served, when its
        declared body is large (issue 13: 8 x 45 MiB bodies took a worker to 2.25 GB); None for
        the common small request, which pays one dict lookup."""
        sem = self.large_bodies
        if sem is None:
            return None
        declared = headers.get("content-length")
        if (
            declared is None
            or len(declared) < 4
            or not declared.isdigit()
            or int(declared) <= self.large_body_bytes
        ):
            return None
        return sem

    async def _enter(self, gate: asyncio.Semaphore) -> None:
        try:
            await asyncio.wait_for(gate.acquire(), self.config.large_body_wait_seconds)
        except TimeoutError:
            log.warning(
                "refusing a large request body: %d already in progress in this worker",
                self.config.large_body_concurrency,
            )
            raise ClientError(
                503,
                "server_busy",
                "too many large requests in progress; retry shortly",
                error_type="server_error",
            ) from None

    async def _serve_whole(
        self, ex: Exchange, snapshot: Snapshot, key, raw_body: bytes, receive, delay: float | None = None
    ) -> None:
        """A request served in this task. A non-stream one mostly answers within a second, so it
        pays only a timer: a disconnect watcher starts after ``watch_delay`` seconds and, when the
        client has gone, cancels this task (and with it the upstream call), recorded as
        ``client_gone``. A possibly streaming one (``delay=0``) is watched from the start; it is
        still served in this task, not a new one, which saves a task switch before the upstream
        call (time to first byte)."""
        task = asyncio.current_task()
        watch = DisconnectWatch(task, receive, ex, self.watch_delay if delay is None else delay)
        try:
            await serve(self.runtime, ex, snapshot, key, raw_body)
        except asyncio.CancelledError:
            if not ex.client_gone or task is None:
                raise
            task.uncancel()
            log.info("client disconnected; upstream request %s cancelled", ex.request_id)
        finally:
            watch.cancel()

    async def _readyz(self, ex: Exchange) -> None:
        """503 until the snapshot is loaded and while the database is unreachable (checked by the
        poller thread, not here) or the instance is shutting down: a balancer stops sending."""
        ready, reason = self.holder.readiness()
        if self.draining:
            ready, reason = False, "shutting down"
        snap = self.holder.current
        body = {
            "status": "ready" if ready else "not_ready",
            "reason": reason,
            "config_version": snap.version if snap is not None else None,
        }
        await ex.send_json(200 if ready else 503, body)

    async def _other(self, scope, ex: Exchange, snapshot: Snapshot, headers, path: str) -> None:
        if path != MODELS_PATH and not path.startswith(MODELS_PATH + "/"):
            raise ClientError(404, "not_found", f"no such endpoint: {path}", error_type="not_found_error")
        if scope["method"] != "GET":
            raise ClientError(405, "method_not_allowed", f"{scope['method']} is not allowed on {path}")
        key = self.authenticate(headers, snapshot.keys_by_hash, time.time())
        if key is None:
            raise ClientError(
                401, "unauthorized", "invalid or missing API key", error_type="authentication_error"
            )
        ex.key = key
        await ex.send_bytes(
            200, orjson.dumps(models_answer(snapshot, key, path[len(MODELS_PATH) + 1 :] or None))
        )
