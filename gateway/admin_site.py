"""The admin site: product name in the titles, apps in the order operators use them, and a link
to the capture viewer in the header (templates/admin/base_site.html).

With ``GATEWAY_DEFER_ADMIN`` (settings; ``gateway.launch`` sets it for its serving workers) the
admin's autodiscovery (importing every app's ``admin.py``, their forms and widgets, and the
admins they pull in) does not run at ``django.setup()``: ``load_deferred_admin`` runs it when the
worker builds its Django handler, on the first request that is not the proxy's
(``gateway.asgi``). A worker that only proxies never loads it (issue 20: idle memory)."""

from __future__ import annotations

import threading

from django.conf import settings
from django.contrib import admin
from django.contrib.admin.apps import AdminConfig

# What an operator reaches for, first to last; apps not named here follow in Django's order.
APP_ORDER = ("providers", "keys", "transforms", "gateway", "requestlogs", "captures", "auth", "authtoken")


class MonogateAdminSite(admin.AdminSite):
    site_header = "Monogate administration"
    site_title = "Monogate admin"
    index_title = "Gateway configuration"
    index_template = "admin/monogate_index.html"  # adds a "Tools" box: playground, capture viewer

    def get_app_list(self, request, app_label=None):
        apps = super().get_app_list(request, app_label)
        rank = {label: i for i, label in enumerate(APP_ORDER)}
        return sorted(apps, key=lambda app: rank.get(app["app_label"], len(rank)))


class MonogateAdminConfig(AdminConfig):
    default_site = "gateway.admin_site.MonogateAdminSite"

    def ready(self) -> None:
        if not getattr(settings, "GATEWAY_DEFER_ADMIN", False):
            super().ready()
            return
        from django.contrib.admin.checks import check_admin_app, check_dependencies
        from django.core import checks

        checks.register(check_dependencies, checks.Tags.admin)
        checks.register(check_admin_app, checks.Tags.admin)
        global _pending
        _pending = True


_pending = False  # ``ready`` deferred the autodiscovery and it has not run yet
_lock = threading.Lock()


def load_deferred_admin() -> None:
    """The admin's autodiscovery, if ``MonogateAdminConfig.ready`` deferred it; once. Called before
    the URLconf is first loaded (it reads ``admin.site.urls``)."""
    global _pending
    if not _pending:
        return
    with _lock:
        if _pending:
            admin.autodiscover()
            _pending = False
