"""REST API: ``/api/api-keys/`` CRUD; ``POST /api/api-keys/{id}/rotate/`` issues a new secret."""

from __future__ import annotations

from django.db import transaction
from rest_framework import viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from keys.models import ApiKey
from keys.serializers import ApiKeySerializer
from keys.services import issue_secret


class ApiKeyViewSet(viewsets.ModelViewSet):
    serializer_class = ApiKeySerializer
    queryset = ApiKey.objects.order_by("name", "id")

    def get_queryset(self):
        qs = super().get_queryset()
        name = self.request.query_params.get("name")
        return qs.filter(name=name) if name else qs

    def create(self, request, *args, **kwargs):
        response = super().create(request, *args, **kwargs)
        response["Cache-Control"] = "no-store"  # carries the secret
        return response

    @action(detail=True, methods=["post"])
    def rotate(self, request, pk=None):
        """A new secret, returned in this response only; the old one stops working."""
        with transaction.atomic():
            key = self.get_object()
            secret = issue_secret(key)
            key.save(update_fields=["prefix", "key_hash"])
        key._gw_issued_secret = secret
        return Response(self.get_serializer(key).data, headers={"Cache-Control": "no-store"})
