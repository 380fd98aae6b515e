"""REST API: ``GET /api/request-logs/`` (filters in ``requestlogs.filters``, newest first,
``limit``/``offset`` paging with exact totals of the filtered rows) and
``GET /api/request-logs/<request_id>/``. Staff see every row; other signed-in users see the rows
of their own keys (``owner``/``username`` filters are staff-only)."""

from __future__ import annotations

from django.http import Http404
from rest_framework import generics, permissions, serializers
from rest_framework.exceptions import ValidationError
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.response import Response

from requestlogs import filters
from requestlogs.models import RequestLog
from requestlogs.totals import cost_text, totals


class RequestLogSerializer(serializers.ModelSerializer):
    cost = serializers.SerializerMethodField()
    api_key = serializers.IntegerField(source="api_key_id", allow_null=True)
    owner = serializers.IntegerField(source="owner_id", allow_null=True)

    class Meta:
        model = RequestLog
        fields = [
            "request_id",
            "x_request_id",
            "client_request_id",
            "created_at",
            "api_key",
            "api_key_name",
            "owner",
            "client_protocol",
            "endpoint",
            "stream",
            "client_ip",
            "status",
            "http_status",
            "error_code",
            "error_message",
            "logical_model",
            "upstream_model",
            "provider",
            "channel",
            "attempts",
            "affinity",
            "input_tokens",
            "output_tokens",
            "cache_read_tokens",
            "cache_write_tokens",
            "reasoning_tokens",
            "cost",
            "cost_estimated",
            "duration_ms",
            "ttfb_ms",
            "has_capture",
        ]

    def get_cost(self, obj: RequestLog) -> str | None:
        return cost_text(obj.cost)


class Paging(LimitOffsetPagination):
    default_limit = 50
    max_limit = 200

    def paginate_queryset(self, queryset, request, view=None):
        self.totals = totals(queryset)
        return super().paginate_queryset(queryset, request, view)

    def get_limit(self, request):
        raw = request.query_params.get(self.limit_query_param)
        if raw is not None and (not raw.isdigit() or int(raw) < 1):
            raise ValidationError({"limit": [f"limit must be an integer from 1 to {self.max_limit}"]})
        return super().get_limit(request)

    def get_offset(self, request):
        raw = request.query_params.get(self.offset_query_param)
        if raw is not None and (not raw.isdigit() or int(raw) > filters.MAX_ID):
            raise ValidationError({"offset": ["offset must be a non-negative integer"]})
        return super().get_offset(request)

    def get_paginated_response(self, data):
        response = super().get_paginated_response(data)
        t = dict(self.totals)
        t["cost"] = cost_text(t["cost"])
        response.data["totals"] = t
        return response


def _visible(request):
    return RequestLog.objects.visible_to(request.user)


class RequestLogListView(generics.ListAPIView):
    serializer_class = RequestLogSerializer
    permission_classes = [permissions.IsAuthenticated]
    pagination_class = Paging

    def get_queryset(self):
        user = self.request.user
        staff = bool(user.is_staff or user.is_superuser)
        try:
            qs = filters.apply(_visible(self.request), self.request.query_params, staff=staff)
        except filters.FilterError as exc:
            raise ValidationError({exc.param: [exc.message], "code": exc.code}) from None
        return qs.order_by("-created_at", "-id")


class RequestLogDetailView(generics.GenericAPIView):
    """By the gateway's request id; failing that, the newest row whose echoed or client
    x-request-id matches (what a client has from its response headers)."""

    serializer_class = RequestLogSerializer
    permission_classes = [permissions.IsAuthenticated]

    def get(self, request, request_id: str):
        qs = _visible(request)
        row = (
            qs.filter(request_id=request_id).first()
            or qs.filter(x_request_id=request_id).order_by("-created_at", "-id").first()
        )
        if row is None:
            raise Http404("no such request log")
        return Response(self.get_serializer(row).data)
