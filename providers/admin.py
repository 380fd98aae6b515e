"""Admin for the upstream topology: providers (channels and the provider chain inline), channels
(models inline).

Upstream keys are write-only: a password input that is always empty when the page is shown,
required when a channel is created, and left empty on edit to keep the stored key (the rule is
``providers.services.set_channel_secret``, shared with the REST API and ``loadconfig``). Neither
the key nor its ciphertext is ever rendered. A model field missing from the hand-arranged
fieldsets still shows, in an "Other" section, so a new field needs no edit here.
"""

from __future__ import annotations

from django import forms
from django.contrib import admin
from django.db.models import Count
from django.urls import reverse
from django.utils.html import format_html

from gateway.admin_widgets import GlobListField, HeaderMapField
from providers.models import Channel, ChannelModel, Provider
from providers.services import CHANNEL_FIELDS, PROVIDER_FIELDS, set_channel_secret
from transforms.admin import ProviderRuleInline

KEY_HELP = (
    "Write-only; leave empty to keep the stored key. A channel without a key sends no credentials "
    "(local upstreams need none)."
)


def with_remaining(fieldsets, fields: tuple[str, ...]):
    """``fieldsets`` plus an "Other" section for writable fields they do not place."""
    placed = {name for _, opts in fieldsets for name in opts.get("fields", ())}
    rest = tuple(name for name in fields if name not in placed)
    return [*fieldsets, ("Other", {"fields": rest})] if rest else fieldsets


class ProviderForm(forms.ModelForm):
    extra_fields_whitelist = GlobListField(
        label="Extra fields whitelist",
        placeholder="only the built-in list",
        help_text="Top-level unknown request fields let through in addition to the built-in list, comma- or "
        'line-separated; "*" lets all through. Empty: only the built-in list.',
    )

    class Meta:
        model = Provider
        fields = "__all__"


class ChannelForm(forms.ModelForm):
    extra_headers = HeaderMapField(
        label="Extra headers", help_text="Sent to the upstream with every request of this channel."
    )
    api_key = forms.CharField(
        label="Upstream API key",
        required=False,
        strip=True,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text=KEY_HELP,
    )

    class Meta:
        model = Channel
        fields = ("name", "protocol", "base_url", "api_key", "weight", "enabled", "extra_headers")

    def clean(self):
        cleaned = super().clean()
        set_channel_secret(self.instance, cleaned.get("api_key"))
        return cleaned


class ChannelModelInline(admin.TabularInline):
    model = ChannelModel
    extra = 1
    fields = ("model", "upstream_model", "multiplier", "price")


class ChannelInline(admin.TabularInline):
    model = Channel
    form = ChannelForm
    extra = 0
    fields = ("name", "protocol", "base_url", "api_key", "weight", "enabled", "key_status", "models_link")
    readonly_fields = ("key_status", "models_link")
    show_change_link = True

    @admin.display(description="Key")
    def key_status(self, obj: Channel) -> str:
        return "stored" if obj.pk and obj.has_api_key else "—"

    @admin.display(description="Models")
    def models_link(self, obj: Channel) -> str:
        if not obj.pk:
            return "save first, then add models"
        names = ", ".join(m.model for m in obj.models.all()[:5]) or "none"
        url = reverse("admin:providers_channel_change", args=[obj.pk])
        return format_html('<a href="{}">{}</a>', url, names)


@admin.register(Provider)
class ProviderAdmin(admin.ModelAdmin):
    list_display = ("name", "enabled", "priority", "channel_count", "protocols", "rule_count", "updated_at")
    list_editable = ("enabled", "priority")
    list_filter = ("enabled", "channels__protocol", "circuit_breaker_enabled")
    search_fields = ("name", "channels__name", "channels__models__model", "channels__base_url")
    ordering = ("priority", "name")
    inlines = [ChannelInline, ProviderRuleInline]
    form = ProviderForm
    fieldsets = (
        (None, {"fields": ("name", "enabled", "priority")}),
        (
            "Retries and timeouts",
            {
                "fields": (
                    "max_retries",
                    "channel_max_retries",
                    "channel_retry_interval_ms",
                    "request_timeout_seconds",
                    "circuit_breaker_enabled",
                    "breaker_failure_threshold",
                    "breaker_window_seconds",
                    "breaker_cooldown_seconds",
                )
            },
        ),
        ("Sticky routing", {"fields": ("affinity_mode", "affinity_failback_seconds")}),
        (
            "Passthrough",
            {"fields": ("strip_cross_protocol_nested", "extra_fields_whitelist"), "classes": ("collapse",)},
        ),
    )

    def get_fieldsets(self, request, obj=None):
        return with_remaining(super().get_fieldsets(request, obj), PROVIDER_FIELDS)

    def get_queryset(self, request):
        return (
            super()
            .get_queryset(request)
            .annotate(
                _channels=Count("channels", distinct=True),
                _rules=Count("transform_rules", distinct=True),
            )
            .prefetch_related("channels")
        )

    @admin.display(description="Channels", ordering="_channels")
    def channel_count(self, obj: Provider) -> int:
        return obj._channels

    @admin.display(description="Protocols")
    def protocols(self, obj: Provider) -> str:
        return ", ".join(sorted({c.protocol for c in obj.channels.all()})) or "—"

    @admin.display(description="Rules", ordering="_rules")
    def rule_count(self, obj: Provider) -> int:
        return obj._rules


@admin.register(Channel)
class ChannelAdmin(admin.ModelAdmin):
    form = ChannelForm
    list_display = (
        "name",
        "provider",
        "protocol",
        "base_url",
        "weight",
        "enabled",
        "key_status",
        "model_names",
        "health",
    )
    list_filter = ("protocol", "enabled", "provider")
    search_fields = ("name", "provider__name", "base_url", "models__model", "models__upstream_model")
    list_select_related = ("provider",)
    ordering = ("provider__priority", "provider__name", "name")
    inlines = [ChannelModelInline]
    fields = ("provider", "name", "protocol", "base_url", "api_key", "weight", "enabled", "extra_headers")
    actions = ["test_channel"]

    @admin.action(description="Test channel: send a minimal request")
    def test_channel(self, request, queryset):
        """An intermediate page: pick a model per channel, then see status, latency and error."""
        from django.contrib.admin import helpers
        from django.template.response import TemplateResponse

        from gateway.channel_check import run_checks

        channels = list(queryset.select_related("provider").prefetch_related("models").order_by("id"))
        rows = [{"channel": ch, "models": [m.model for m in ch.models.all()]} for ch in channels]
        results = None
        if request.POST.get("run_check"):
            pairs = []
            for row in rows:
                ch = row["channel"]
                model = (request.POST.get(f"model_{ch.pk}") or "").strip() or (row["models"] or [""])[0]
                row["chosen"] = model
                pairs.append((ch, model))
            results = run_checks([p for p in pairs if p[1]])
            by_id = {r["channel_id"]: r for r in results}
            for row in rows:
                row["result"] = by_id.get(row["channel"].pk)
        return TemplateResponse(
            request,
            "admin/providers/channel/test_channel.html",
            {
                **self.admin_site.each_context(request),
                "title": "Test channels",
                "rows": rows,
                "results": results,
                "opts": self.model._meta,
                "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
            },
        )

    def get_fieldsets(self, request, obj=None):
        return with_remaining(super().get_fieldsets(request, obj), CHANNEL_FIELDS)

    def get_queryset(self, request):
        return super().get_queryset(request).prefetch_related("models")

    @admin.display(description="Key")
    def key_status(self, obj: Channel) -> str:
        return "stored" if obj.has_api_key else "missing"

    @admin.display(description="Models")
    def model_names(self, obj: Channel) -> str:
        return ", ".join(str(m) for m in obj.models.all()) or "—"

    def changelist_view(self, request, extra_context=None):
        from providers.health import last_results

        self._health = last_results()  # one Redis read per page, not per row
        return super().changelist_view(request, extra_context)

    @admin.display(description="Health")
    def health(self, obj: Channel) -> str:
        """The last scheduled probe (GATEWAY_HEALTH_PROBE_SECONDS): OK with latency, or the error."""
        from datetime import UTC, datetime

        from django.utils.timesince import timesince

        result = getattr(self, "_health", {}).get(obj.pk)
        if not result:
            return "—"
        when = timesince(datetime.fromtimestamp(result.get("checked_at", 0), UTC))
        if result.get("ok"):
            return format_html(
                '<span style="color:#146c2e">OK</span> {} ms, {} ago', result.get("latency_ms"), when
            )
        return format_html(
            '<span style="color:#b3261e" title="{}">failed</span>: {} ({} ago)',
            result.get("error") or "",
            result.get("error") or "",
            when,
        )


@admin.register(ChannelModel)
class ChannelModelAdmin(admin.ModelAdmin):
    """A flat list of every logical model and where it goes: the quickest answer to 'who serves X'."""

    list_display = ("model", "upstream_model", "multiplier", "channel", "protocol")
    list_filter = ("channel__protocol", "channel__provider")
    search_fields = ("model", "upstream_model", "channel__name", "channel__provider__name")
    list_select_related = ("channel", "channel__provider")
    autocomplete_fields = ("channel",)

    @admin.display(description="Protocol", ordering="channel__protocol")
    def protocol(self, obj: ChannelModel) -> str:
        return obj.channel.get_protocol_display()
