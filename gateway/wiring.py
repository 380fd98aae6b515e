"""The project layer's assembly of the proxy: the one place that knows which apps plug into
the core. ``build_proxy_app`` gives the ASGI proxy its configuration source (the database, via
``gateway.live_config``), its authenticator (``keys.auth``), its recorders (captures, request logs) and its
knobs (``settings.GATEWAY``). The core (``gateway.urp``, ``gateway.protocols``, ``gateway.proxy``)
imports none of these; a new recorder (request logs, metrics) is one more entry in
:func:`recorder_factories`.
"""

from __future__ import annotations

import hashlib
import ipaddress
from collections.abc import Mapping

from django.conf import settings

from gateway.conf import gateway_settings
from gateway.live_config import DatabaseConfigSource
from gateway.proxy.app import ProxyApp
from gateway.proxy.config import ProxyConfig
from gateway.proxy.limits import IPNetwork
from gateway.proxy.recorder import RecorderFactory, RecorderSet, UnrecordedFactory
from gateway.proxy.snapshot import KeySnap
from keys.auth import authenticate as authenticate_secret
from keys.auth import extract_secret


def proxy_config() -> ProxyConfig:
    gw = gateway_settings
    return ProxyConfig(
        max_body_bytes=int(gw.MAX_BODY_BYTES),
        keepalive_seconds=float(gw.KEEPALIVE_SECONDS),
        config_poll_seconds=float(gw.CONFIG_POLL_SECONDS),
        breaker_failures=int(gw.BREAKER_FAILURES),
        breaker_window_seconds=float(gw.BREAKER_WINDOW_SECONDS),
        breaker_cooldown_seconds=float(gw.BREAKER_COOLDOWN_SECONDS),
        breaker_rate_limit_cooldown_seconds=float(gw.BREAKER_RATE_LIMIT_COOLDOWN_SECONDS),
        redis_url=settings.REDIS_URL or "",
        trusted_proxies=trusted_proxies(),
        stream_first_byte_timeout=float(gw.STREAM_FIRST_BYTE_TIMEOUT),
        stream_idle_timeout=float(gw.STREAM_IDLE_TIMEOUT),
        stream_max_seconds=float(gw.STREAM_MAX_SECONDS),
        large_body_bytes=int(gw.LARGE_BODY_BYTES),
        large_body_concurrency=int(gw.LARGE_BODY_CONCURRENCY),
        large_body_wait_seconds=float(gw.LARGE_BODY_WAIT_SECONDS),
        offload_json_bytes=int(gw.OFFLOAD_JSON_BYTES),
        instance_id=instance_id(),
        ssrf_guard=bool(int(gw.UPSTREAM_SSRF_GUARD)),
        gc_gen0_threshold=int(gw.GC_GEN0_THRESHOLD),
    )


def trusted_proxies() -> tuple[IPNetwork, ...]:
    """``GATEWAY_TRUSTED_PROXY_CIDRS``: the peers whose X-Forwarded-For names the client; ``none``
    trusts nobody (an empty environment variable means the default, loopback)."""
    text = str(gateway_settings.TRUSTED_PROXY_CIDRS).strip()
    if text.lower() == "none":
        return ()
    return tuple(ipaddress.ip_network(c.strip(), strict=False) for c in text.split(",") if c.strip())


def instance_id() -> str:
    """The loop guard's id: ``GATEWAY_INSTANCE_ID``, or derived from ``SECRET_KEY`` so every
    worker and instance of one deployment shares it (a hash: the key itself never leaves)."""
    configured = str(gateway_settings.INSTANCE_ID or "").strip()
    if configured:
        return configured[:64]
    return "mg-" + hashlib.sha256(b"monogate-hop:" + settings.SECRET_KEY.encode()).hexdigest()[:16]


def authenticate(
    headers: Mapping[str, str], keys_by_hash: Mapping[str, KeySnap], now: float
) -> KeySnap | None:
    """The client's key from its headers (``keys.auth``: one HMAC and one dict lookup)."""
    return authenticate_secret(extract_secret(headers), keys_by_hash, now)


def recorder_factories() -> list[RecorderFactory]:
    """The observe recorder (metrics, access line, live tail: always on), captures and request logs."""
    from captures import sink
    from captures.recorder import capture_recorder
    from gateway.observe import metrics, recorder
    from requestlogs import sink as requestlog_sink
    from requestlogs.recorder import make_factory

    recorder.configure(str(gateway_settings.ACCESS_LOG_LEVEL))
    metrics.QUEUES["captures"] = lambda: (sink.writer.queue.qsize(), sink.STATS["dropped"])
    metrics.QUEUES["request_logs"] = lambda: (
        requestlog_sink.writer.queue.qsize(),
        requestlog_sink.STATS["dropped"],
    )
    # With request logs on, their recorder is the observe recorder with the row added (one
    # recorder per request, no fan-out: ``requestlogs.recorder``).
    observe = make_factory(bool(gateway_settings.REQUEST_LOGS)) or recorder.observe_recorder
    return [observe, capture_recorder]


def unrecorded_factory() -> UnrecordedFactory:
    """Every other /v1 answer (refused before a recorder existed, models list, non-generation
    endpoints): the same observe and request-log recorders, keyless answers within a budget
    (``gateway.observe.unrecorded``)."""
    from gateway.observe.unrecorded import unrecorded_factory as build
    from requestlogs import sink as requestlog_sink
    from requestlogs.recorder import make_unrecorded_factory

    writer = requestlog_sink.writer

    def queue_busy() -> bool:
        return writer.queue.qsize() * 2 > writer.queue_max

    return build(
        keyless_per_second=float(gateway_settings.REQUEST_LOG_KEYLESS_PER_SECOND),
        logged=make_unrecorded_factory(bool(gateway_settings.REQUEST_LOGS)),
        queue_busy=queue_busy,
    )


def startup_hooks() -> list:
    """Callables the proxy runs at lifespan startup: the capture and request-log writers start and
    pick up every spool file left by earlier processes (issue 13)."""
    from captures.sink import writer as capture_writer

    hooks = [capture_writer.start]
    if gateway_settings.REQUEST_LOGS:  # the request-log writer shares that machinery (gateway.handoff)
        from requestlogs.sink import writer as request_log_writer

        hooks.append(request_log_writer.start)
    return hooks


def shutdown_hooks() -> list:
    """Blocking callables the proxy runs at lifespan shutdown, after in-flight requests ended:
    the recorders' queues are flushed (to the broker, the database or the spool)."""
    from captures.sink import shutdown as flush_captures
    from requestlogs.sink import writer as request_log_writer

    def flush_request_logs() -> None:
        request_log_writer.shutdown(float(gateway_settings.CAPTURE_FLUSH_SECONDS))

    return [flush_captures, flush_request_logs]


def metrics_app(proxy: ProxyApp):
    """``GET /metrics`` (``gateway.observe.metrics``) with the breaker state of ``proxy``'s worker."""
    from gateway.observe.metrics import BreakerCollector, MetricsApp, parse_cidrs

    def breaker_rows():
        snapshot = proxy.holder.current
        if snapshot is None:
            return
        for provider in snapshot.providers:
            for channel in provider.channels:
                yield provider.name, channel.name, proxy.breaker.state(channel.id)

    return MetricsApp(
        allow=parse_cidrs(str(gateway_settings.METRICS_ALLOW_CIDRS)),
        token=str(gateway_settings.METRICS_TOKEN),
        trusted=trusted_proxies(),
        extra=[BreakerCollector(breaker_rows)],
    )


def websocket_app():
    """The WebSockets (Channels, session auth): the staff live tail at ``/captures/live/ws``."""
    from channels.auth import AuthMiddlewareStack
    from channels.routing import URLRouter
    from channels.security.websocket import AllowedHostsOriginValidator
    from django.urls import path

    from gateway.observe.consumer import LiveTailConsumer

    return AllowedHostsOriginValidator(
        AuthMiddlewareStack(
            URLRouter(
                [
                    path("captures/live/ws", LiveTailConsumer.as_asgi()),
                ]
            )
        )
    )


def build_proxy_app() -> ProxyApp:
    app = ProxyApp(
        proxy_config(),
        DatabaseConfigSource(),
        authenticate,
        RecorderSet(recorder_factories(), unrecorded_factory()),
    )
    # The capture and request-log writers pick up every spool file at worker start and drain
    # their queues (then spool the rest) at shutdown (issue 13).
    app.startup_hooks.extend(startup_hooks())
    for hook in shutdown_hooks():
        app.on_shutdown(hook)
    return app
