"""REST API: ``/api/providers/`` (nested channels and models; see providers.serializers)."""

from __future__ import annotations

from rest_framework import viewsets

from providers.models import Provider
from providers.serializers import ProviderSerializer


class ProviderViewSet(viewsets.ModelViewSet):
    serializer_class = ProviderSerializer
    queryset = Provider.objects.prefetch_related("channels__models").order_by("priority", "name")

    def get_queryset(self):
        qs = super().get_queryset()
        name = self.request.query_params.get("name")
        return qs.filter(name=name) if name else qs
