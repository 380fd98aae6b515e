"""ASGI entry point: ``/v1/*`` and its aliases go to the proxy app (no Django request handling on
the hot path), ``/metrics`` to the Prometheus endpoint (no ORM per scrape), other WebSockets to
Channels (the staff live tail); everything else (admin, REST API, capture viewer) is Django."""

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gateway.settings")

import django  # noqa: E402

django.setup()

from transforms.checks import log_problems  # noqa: E402

# Broken transforms and plug-ins are logged at start-up; the server still starts. Under
# ``gateway.launch`` they run once, beside the workers (GATEWAY_SKIP_START_CHECKS).
if not os.environ.get("GATEWAY_SKIP_START_CHECKS"):
    log_problems()

from django.core.asgi import get_asgi_application  # noqa: E402

from gateway.proxy.app import is_proxy_path  # noqa: E402
from gateway.wiring import build_proxy_app, metrics_app, websocket_app  # noqa: E402

django_app = get_asgi_application()
proxy_app = build_proxy_app()  # the core proxy with the project's config source, auth and recorders
prometheus_app = metrics_app(proxy_app)
ws_app = websocket_app()


async def application(scope, receive, send):
    if scope["type"] in ("http", "websocket") and is_proxy_path(scope["path"]):
        await proxy_app(scope, receive, send)
    elif scope["type"] == "http" and scope["path"] == "/metrics":
        await prometheus_app(scope, receive, send)
    elif scope["type"] == "websocket":
        await ws_app(scope, receive, send)
    elif scope["type"] == "lifespan":
        await proxy_app.lifespan(scope, receive, send)
    else:
        await django_app(scope, receive, send)
