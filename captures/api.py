"""REST API (staff, like the rest of ``/api/``): ``/api/captures/`` lists with the viewer's
filters, newest first; ``/api/captures/<request_id>/`` returns the metadata and the dump."""

from __future__ import annotations

import orjson
from rest_framework import generics, serializers
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response

from captures import filters
from captures.models import Capture
from captures.views import find_capture


class CaptureSerializer(serializers.ModelSerializer):
    class Meta:
        model = Capture
        fields = [
            "id",
            "request_id",
            "client_request_id",
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
        ]


class CaptureListView(generics.ListAPIView):
    serializer_class = CaptureSerializer

    def get_queryset(self):
        qs = Capture.objects.visible_to(self.request.user).listing().order_by("-created_at", "-id")
        try:
            return filters.apply(qs, self.request.query_params)[0]
        except filters.InvalidFilter as exc:
            raise ValidationError({exc.name: [str(exc)]}) from None


class CaptureDetailView(generics.GenericAPIView):
    serializer_class = CaptureSerializer

    def get(self, request, request_id: str):
        cap = find_capture(request.user, request_id)
        data = self.get_serializer(cap).data
        data["dump"] = orjson.loads(cap.dump_bytes())
        return Response(data)
