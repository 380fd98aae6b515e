"""ASGI entry point: ``/v1/*`` and its aliases go to the proxy app (no Django request handling on
the hot path), ``/metrics`` to the Prometheus endpoint (no ORM per scrape), other WebSockets to
Channels (the staff live tail); everything else (admin, REST API, capture viewer) is Django.

Django's request handler (its middleware, URLconf and views) and the Channels stack are built on
the first request that needs them, not at start-up: a worker that only proxies never loads them
(issue 20: a worker's idle memory). With ``GATEWAY_DEFER_ADMIN`` (``gateway.launch`` sets it for
its workers) the admin's registrations (every app's ``admin.py``) wait for that moment too
(``gateway.admin_site.MonogateAdminConfig``).
"""

import os
from typing import Any

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gateway.settings")

import django  # noqa: E402

django.setup()

from transforms.checks import log_problems  # noqa: E402

# Broken transforms and plug-ins are logged at start-up; the server still starts. Under
# ``gateway.launch`` they run once, beside the workers (GATEWAY_SKIP_START_CHECKS).
if not os.environ.get("GATEWAY_SKIP_START_CHECKS"):
    log_problems()

from gateway.proxy.app import is_proxy_path  # noqa: E402
from gateway.wiring import build_proxy_app, metrics_app  # noqa: E402

ASGIApp = Any  # an ASGI callable: (scope, receive, send) -> awaitable
proxy_app = build_proxy_app()  # the core proxy with the project's config source, auth and recorders
prometheus_app = metrics_app(proxy_app)
_django_app: ASGIApp | None = None
_ws_app: ASGIApp | None = None


def django_app() -> ASGIApp:
    """Django's ASGI handler, built once, on the first request that is Django's (what
    ``get_asgi_application`` does after ``django.setup()``, which ran above). The admin's
    deferred registrations are made first, so its URLs are complete when the URLconf loads."""
    global _django_app
    if _django_app is None:
        from django.core.handlers.asgi import ASGIHandler

        from gateway.admin_site import load_deferred_admin

        load_deferred_admin()
        _django_app = ASGIHandler()
    return _django_app


def ws_app() -> ASGIApp:
    """The Channels WebSocket stack (the staff live tail), built on the first WebSocket."""
    global _ws_app
    if _ws_app is None:
        from gateway.wiring import websocket_app

        _ws_app = websocket_app()
    return _ws_app


async def application(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] in ("http", "websocket") and is_proxy_path(scope["path"]):
        await proxy_app(scope, receive, send)
    elif scope["type"] == "http" and scope["path"] == "/metrics":
        await prometheus_app(scope, receive, send)
    elif scope["type"] == "websocket":
        await ws_app()(scope, receive, send)
    elif scope["type"] == "lifespan":
        await proxy_app.lifespan(scope, receive, send)
    else:
        await django_app()(scope, receive, send)
