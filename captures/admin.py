"""Captures in the admin: read-only metadata with a link to the viewer (dumps are read there)."""

from __future__ import annotations

from django.contrib import admin
from django.urls import reverse
from django.utils.html import format_html

from captures.models import Capture


@admin.register(Capture)
class CaptureAdmin(admin.ModelAdmin):
    list_display = (
        "request_id",
        "created_at",
        "api_key_name",
        "client_protocol",
        "stream",
        "logical_model",
        "status",
        "is_error",
        "attempt_count",
        "size_bytes",
        "viewer_link",
    )
    list_filter = ("client_protocol", "stream", "is_error", "truncated")
    search_fields = ("request_id", "logical_model", "api_key_name")
    date_hierarchy = "created_at"
    exclude = ("payload",)
    readonly_fields = (
        "request_id",
        "created_at",
        "api_key",
        "api_key_name",
        "owner_id",
        "client_protocol",
        "stream",
        "logical_model",
        "status",
        "is_error",
        "attempt_count",
        "truncated",
        "raw_bytes",
        "size_bytes",
        "viewer_link",
    )

    def get_queryset(self, request):
        return super().get_queryset(request).defer("payload")

    @admin.display(description="Viewer")
    def viewer_link(self, obj: Capture) -> str:
        return format_html('<a href="{}">open</a>', reverse("captures:detail", args=[obj.request_id]))

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False
