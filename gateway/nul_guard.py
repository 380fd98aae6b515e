"""Requests to the admin, the REST API and the capture viewer whose path or query string carries
a NUL character are answered 400 before any view runs. PostgreSQL refuses NUL in text, so such a
value reaching a lookup (``?search=%00``, a request id in the path) was a 500; forms and DRF
serializers already refuse NUL in what they validate, query parameters and path segments went
unchecked. The /v1 proxy is not Django and does not pass here."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, JsonResponse

MESSAGE = "the request's path or query string contains a NUL character (%00)"


class NulCharacterMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if "%00" in request.META.get("QUERY_STRING", "") or "\x00" in request.path:
            if request.path.startswith("/api/"):
                return JsonResponse({"detail": MESSAGE, "code": "nul_character"}, status=400)
            return HttpResponse(MESSAGE + "\n", status=400, content_type="text/plain; charset=utf-8")
        return self.get_response(request)
