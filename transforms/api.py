"""REST API for transforms: the registry (``GET /api/transforms/registry``) and rule CRUD in
every scope (``/api/transforms/rules/``, filter with ``?scope=``, ``?provider=``, ``?api_key=``)."""

from rest_framework import viewsets
from rest_framework.response import Response
from rest_framework.views import APIView

from transforms.models import SCOPE_CHOICES, TransformRule
from transforms.registry import registry
from transforms.serializers import TransformRuleSerializer


class RegistryView(APIView):
    def get(self, request):
        return Response(registry.entries())


class TransformRuleViewSet(viewsets.ModelViewSet):
    serializer_class = TransformRuleSerializer
    queryset = TransformRule.objects.order_by("scope", "provider_id", "api_key_id", "position", "id")

    def get_queryset(self):
        qs = super().get_queryset()
        params = self.request.query_params
        scope = params.get("scope")
        if scope in dict(SCOPE_CHOICES):
            qs = qs.filter(scope=scope)
        elif scope:
            qs = qs.none()
        for name in ("provider", "api_key"):
            value = params.get(name)
            if value:
                qs = qs.filter(**{f"{name}_id": value}) if value.isdigit() else qs.none()
        return qs
