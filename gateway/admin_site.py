"""The admin site: product name in the titles, apps in the order operators use them, and a link
to the capture viewer in the header (templates/admin/base_site.html)."""

from __future__ import annotations

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
