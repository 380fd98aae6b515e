"""REST API for the GlobalSettings singleton: ``GET``/``PUT``/``PATCH /api/settings/``."""

from __future__ import annotations

from rest_framework.response import Response
from rest_framework.views import APIView

from gateway.models import GlobalSettings
from gateway.serializers import GlobalSettingsSerializer


class SettingsView(APIView):
    def get(self, request):
        return Response(GlobalSettingsSerializer(GlobalSettings.load()).data)

    def put(self, request):
        return self._update(request, partial=False)

    def patch(self, request):
        return self._update(request, partial=True)

    def _update(self, request, *, partial: bool):
        serializer = GlobalSettingsSerializer(GlobalSettings.load(), data=request.data, partial=partial)
        serializer.is_valid(raise_exception=True)
        serializer.save()
        return Response(serializer.data)
