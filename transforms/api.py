from rest_framework.response import Response
from rest_framework.views import APIView

from transforms.registry import registry_entries


class RegistryView(APIView):
    def get(self, request):
        return Response(registry_entries())
