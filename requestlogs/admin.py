"""Request logs in the admin: a read-only changelist with the reference's filters, totals of the
filtered rows computed by the database (exact integers; cost as a Decimal), and a link to the
capture when one was recorded.

The filters the admin's own machinery has no widget for (model substring terms, time range, key
and owner by id) travel as the REST API's query parameters (``requestlogs.filters``): they are
taken off the request before Django's ChangeList sees them (it refuses parameters that are not
field lookups) and applied in ``get_queryset``. Status, key, owner, protocol and stream are also
ordinary list filters; the search box covers request ids, client IP and model.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from django.contrib import admin, messages
from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html
from django.utils.safestring import mark_safe

from requestlogs import filters
from requestlogs.models import RequestLog, Status
from requestlogs.totals import TOKEN_FIELDS, cost_text, totals
from requestlogs.usage import GROUPS, METRICS, summarise, svg_chart

EXTRA_PARAMS = ("model", "time_from", "time_to", "api_key", "owner")


class StatusFilter(admin.SimpleListFilter):
    """The status list filter through ``filters.by_status``, so a failure status uses the partial
    status index (Django's own choices filter would scan the newest-first index instead)."""

    title = "status"
    parameter_name = "status__exact"  # the parameter Django's own filter used: old links still work

    def lookups(self, request: HttpRequest, model_admin: object) -> list[tuple[str, str]]:
        return list(Status.choices)

    def queryset(self, request: HttpRequest, queryset: object) -> object:
        value = self.value()
        return filters.by_status(queryset, value) if value in Status.values else queryset


@admin.register(RequestLog)
class RequestLogAdmin(admin.ModelAdmin):
    list_display = (
        "created_at",
        "request_id",
        "endpoint",
        "api_key_name",
        "logical_model",
        "provider",
        "channel",
        "status",
        "http_status",
        "input_tokens",
        "output_tokens",
        "cost_display",
        "duration_ms",
        "capture_link",
    )
    list_filter = (
        StatusFilter,
        "endpoint",
        "client_protocol",
        "stream",
        "cost_estimated",
        "api_key",
        "owner",
    )
    search_fields = (
        "request_id",
        "x_request_id",
        "client_request_id",
        "client_ip",
        "logical_model",
        "error_code",
    )
    date_hierarchy = "created_at"
    list_select_related = False
    show_full_result_count = False
    readonly_fields = [f.name for f in RequestLog._meta.fields] + ["cost_display", "capture_link"]
    change_list_template = "admin/requestlogs/requestlog/change_list.html"

    # -- the reference's filters, as query parameters --------------------------------------------
    def changelist_view(self, request: HttpRequest, extra_context=None):
        params = {}
        if any(p in request.GET for p in EXTRA_PARAMS):
            query = request.GET.copy()
            for name in EXTRA_PARAMS:
                value = query.pop(name, [""])[-1]
                if value.strip():
                    params[name] = value
            request.GET = query
            request.META["QUERY_STRING"] = query.urlencode()
        request._requestlog_params = params
        response = super().changelist_view(
            request,
            extra_context={**(extra_context or {}), "extra_params": params, "token_fields": TOKEN_FIELDS},
        )
        cl = getattr(response, "context_data", {}).get("cl") if hasattr(response, "context_data") else None
        if cl is not None:
            sums = totals(cl.queryset)
            sums["cost"] = cost_text(sums["cost"])
            response.context_data["totals"] = sums
        return response

    def get_queryset(self, request: HttpRequest):
        qs = super().get_queryset(request)
        params = getattr(request, "_requestlog_params", None)
        if params:
            try:
                qs = filters.apply(qs, params)
            except filters.FilterError as exc:
                messages.error(request, f"{exc.param}: {exc.message}")
                return qs.none()
        return qs

    # -- usage summaries ---------------------------------------------------------------------
    def get_urls(self):
        usage = self.admin_site.admin_view(self.usage_view)
        return [path("usage/", usage, name="requestlogs_requestlog_usage"), *super().get_urls()]

    def usage_view(self, request: HttpRequest):
        """Requests, tokens and cost by day and model, per key or per owner, with a chart.
        Parameters: ``group`` (key, owner), ``metric`` (cost, tokens, requests), ``days`` (30),
        and the list filters (``api_key``, ``owner``, ``model``, ``time_from``/``time_to``)."""
        group = request.GET.get("group") if request.GET.get("group") in GROUPS else "key"
        metric = request.GET.get("metric") if request.GET.get("metric") in METRICS else "cost"
        raw_days = request.GET.get("days", "30")
        days = min(int(raw_days), 366) if raw_days.isdigit() and int(raw_days) > 0 else 30
        params = {k: request.GET[k] for k in EXTRA_PARAMS if (request.GET.get(k) or "").strip()}
        qs = super().get_queryset(request)
        error = None
        try:
            qs = filters.apply(qs, params)
            until = (
                filters.parse_time("time_to", params["time_to"])
                if "time_to" in params
                else datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0) + timedelta(days=1)
            )
            since = (
                filters.parse_time("time_from", params["time_from"])
                if "time_from" in params
                else until - timedelta(days=days)
            )
        except filters.FilterError as exc:
            error = f"{exc.param}: {exc.message}"
            qs = qs.none()
            until = datetime.now(UTC)
            since = until - timedelta(days=days)
        summary = summarise(qs, group, since, until)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": "Usage by day and model",
            "summary": summary,
            "chart": mark_safe(svg_chart(summary, metric)),  # escaped inside
            "group": group,
            "metric": metric,
            "days": days,
            "params": params,
            "error": error,
            "groups": list(GROUPS),
            "metrics": METRICS,
            "since": since,
            "until": until,
            "totals": _summary_totals(summary),
        }
        return TemplateResponse(request, "admin/requestlogs/requestlog/usage.html", context)

    # -- columns ----------------------------------------------------------------------------
    @admin.display(description="Cost (USD)", ordering="cost_nano")
    def cost_display(self, obj: RequestLog) -> str:
        text = cost_text(obj.cost)
        if text is None:
            return "—"
        return f"{text} (estimated)" if obj.cost_estimated else text

    @admin.display(description="Capture")
    def capture_link(self, obj: RequestLog) -> str:
        if not obj.has_capture:
            return "—"
        # a capture's identity is the gateway's own id (issue 13), the same as the row's
        return format_html('<a href="{}">open</a>', reverse("captures:detail", args=[obj.request_id]))

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


def _summary_totals(summary) -> dict:
    from decimal import Decimal

    from requestlogs.models import NANO

    return {
        "requests": sum(r.requests for r in summary.rows),
        "input_tokens": sum(r.input_tokens for r in summary.rows),
        "output_tokens": sum(r.output_tokens for r in summary.rows),
        "cost": format((Decimal(sum(r.cost_nano for r in summary.rows)) * NANO).quantize(NANO), "f"),
    }
