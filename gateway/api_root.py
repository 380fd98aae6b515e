"""``GET /api/``: every list endpoint of the REST API, found from the URL patterns themselves so
an endpoint added later is listed without anyone remembering to add it here."""

from __future__ import annotations

from django.urls import URLPattern, URLResolver, get_resolver
from rest_framework.response import Response
from rest_framework.reverse import reverse
from rest_framework.views import APIView


def _endpoints(patterns, prefix: str = "") -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    for entry in patterns:
        route = prefix + str(entry.pattern)
        if isinstance(entry, URLResolver):
            found += _endpoints(entry.url_patterns, route)
        elif isinstance(entry, URLPattern) and entry.name and not entry.pattern.converters:
            regex = getattr(entry.pattern, "_regex", "")
            if "(?P<" not in regex and "format" not in regex and route.strip("^$/"):
                found.append((route.strip("^$").replace("\\", ""), entry.name))
    return found


class ApiRootView(APIView):
    """The REST API's endpoints by path; each value is the absolute URL."""

    def get(self, request):
        resolver = get_resolver()
        api = next(
            p for p in resolver.url_patterns if isinstance(p, URLResolver) and str(p.pattern) == "api/"
        )
        endpoints = {}
        for route, name in _endpoints(api.url_patterns):
            endpoints[route.rstrip("/") or route] = reverse(name, request=request)
        return Response(dict(sorted(endpoints.items())))
