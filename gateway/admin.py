"""Admin for the GlobalSettings singleton: the list page goes straight to the one row."""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpResponseRedirect
from django.urls import reverse
from django.utils.html import format_html

from gateway.models import GlobalSettings


@admin.register(GlobalSettings)
class GlobalSettingsAdmin(admin.ModelAdmin):
    readonly_fields = ("global_chain", "updated_at")
    fieldsets = (
        ("Capture", {"fields": ("capture_enabled", "capture_retention_days", "capture_max_total_mb")}),
        (
            "Upstream",
            {
                "fields": (
                    "request_timeout_seconds",
                    "connect_timeout_seconds",
                    "upstream_idle_timeout_seconds",
                    "strip_cross_protocol_nested",
                )
            },
        ),
        ("Outbound fetches", {"fields": ("fetch_allow_private", "guard_channel_urls")}),
        ("Transforms", {"fields": ("global_chain", "reasoning_effort_suffixes")}),
        ("Models", {"fields": ("codex_model_ids",)}),
        (None, {"fields": ("updated_at",)}),
    )

    def has_add_permission(self, request) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False

    def changelist_view(self, request, extra_context=None):
        obj = GlobalSettings.load()
        return HttpResponseRedirect(reverse("admin:gateway_globalsettings_change", args=[obj.pk]))

    @admin.display(description="Global transform chain")
    def global_chain(self, obj: GlobalSettings) -> str:
        url = reverse("admin:transforms_globaltransformrule_changelist")
        return format_html(
            '<a href="{}">Edit the global chain</a> (runs after provider rules, before API-key rules)', url
        )
