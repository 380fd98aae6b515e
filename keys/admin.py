"""Admin for client API keys.

The secret is generated on creation and shown exactly once, in the response to the add form
(not through the messages framework, which would park it in a cookie or the session). Only its
keyed hash and a short prefix are stored. "Rotate secret" issues a new one the same way.
"""

from __future__ import annotations

from django import forms
from django.contrib import admin
from django.db import transaction
from django.template.response import TemplateResponse

from gateway.admin_widgets import GlobListField, LimitsField, RedirectRulesField
from keys.models import LIMIT_NAMES, SPEND_NAMES, ApiKey
from keys.services import issue_secret
from transforms.admin import ApiKeyRuleInline

_SECRET_ATTR = "_gw_new_api_key_secret"


class ApiKeyForm(forms.ModelForm):
    allowed_models = GlobListField(
        help_text="Globs of logical models this key may use (* any run, ? one character), comma- or "
        "line-separated. Empty allows all."
    )
    model_redirects = RedirectRulesField(
        label="Model redirects",
        help_text="Ordered; the first pattern that matches the whole requested model rewrites it.",
    )
    limits = LimitsField(
        LIMIT_NAMES,
        SPEND_NAMES,
        label="Limits",
        help_text="Requests per minute, tokens per minute, concurrent requests (429 with "
        "Retry-After), daily (UTC) and total spend caps in USD (402); blank: no limit. "
        "Shared by every worker through Redis.",
    )
    ip_allow = GlobListField(
        label="IP allow-list",
        placeholder="every address",
        help_text="IP addresses or CIDR blocks (10.0.0.0/8), comma- or line-separated; "
        "empty allows every address.",
    )

    class Meta:
        model = ApiKey
        fields = "__all__"


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    form = ApiKeyForm
    list_display = (
        "name",
        "prefix_display",
        "enabled",
        "expires_at",
        "capture_mode",
        "owner",
        "created_at",
        "last_used_at",
    )
    list_filter = ("enabled", "capture_mode", ("expires_at", admin.EmptyFieldListFilter))
    search_fields = ("name", "prefix", "owner__username")
    list_editable = ("enabled",)
    readonly_fields = ("prefix_display", "created_at", "last_used_at", "captures_link")
    inlines = [ApiKeyRuleInline]
    actions = ["rotate_secret"]
    fieldsets = (
        (None, {"fields": ("name", "owner", "enabled", "expires_at", "prefix_display")}),
        ("Policy", {"fields": ("allowed_models", "model_redirects", "capture_mode", "reasoning_envelopes")}),
        ("Limits", {"fields": ("limits", "ip_allow")}),
        ("Activity", {"fields": ("created_at", "last_used_at", "captures_link")}),
    )

    @admin.display(description="Key", ordering="prefix")
    def prefix_display(self, obj: ApiKey) -> str:
        return f"{obj.prefix}…" if obj.prefix else "(generated when saved)"

    @admin.display(description="Captures")
    def captures_link(self, obj: ApiKey) -> str:  # capture issue: link to this key's captures
        if not obj.pk:
            return "—"
        from django.urls import reverse
        from django.utils.html import format_html

        return format_html(
            '<a href="{}?key={}">View this key\'s request captures</a>', reverse("captures:list"), obj.pk
        )

    def save_model(self, request, obj: ApiKey, form, change: bool) -> None:
        if not change:
            setattr(request, _SECRET_ATTR, issue_secret(obj))
        super().save_model(request, obj, form, change)

    def response_add(self, request, obj: ApiKey, post_url_continue=None):
        secret = getattr(request, _SECRET_ATTR, None)
        if secret is None:
            return super().response_add(request, obj, post_url_continue)
        return self._secret_page(request, [(obj, secret)], "API key created")

    @admin.action(description="Rotate secret (the old one stops working; the new one is shown once)")
    def rotate_secret(self, request, queryset):
        issued = []
        with transaction.atomic():
            for key in queryset.select_for_update():
                secret = issue_secret(key)
                key.save(update_fields=["prefix", "key_hash"])
                issued.append((key, secret))
        return self._secret_page(request, issued, "New API key secrets")

    def _secret_page(self, request, issued, title: str):
        context = {
            **self.admin_site.each_context(request),
            "title": title,
            "opts": self.model._meta,
            "issued": issued,
        }
        response = TemplateResponse(request, "keys/admin/secret_once.html", context)
        # The page holds a secret: keep it out of every cache.
        response["Cache-Control"] = "no-store"
        return response
