"""A clear answer while the database is unreachable (issue 13).

The ``/v1/*`` proxy serves from its in-memory snapshot and never needs the database per request;
the admin, the capture viewer and the REST API do. Without this middleware a database outage
shows their users a bare "Server Error (500)" and logs a traceback per request; with it they get
503 with ``Retry-After`` and a sentence that says what is wrong (JSON under ``/api/``, a small
page elsewhere), and the log gets one line per request instead of a traceback.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse

log = logging.getLogger("gateway.dbdown")

MESSAGE = (
    "The database is unreachable right now; the gateway keeps serving model requests. Try again shortly."
)
PAGE = (
    "<!doctype html><html><head><meta charset='utf-8'><title>Database unreachable</title></head>"
    f"<body><h1>Database unreachable</h1><p>{MESSAGE}</p></body></html>"
)
RETRY_AFTER = "5"


class DatabaseUnavailableMiddleware:
    """Turns a database connection error raised by a view into 503 with a clear message."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not isinstance(exception, OperationalError | InterfaceError):
            return None
        log.error(
            "database unreachable: %s %s answered 503 (%s)",
            request.method,
            request.path,
            str(exception).strip().splitlines()[0][:200]
            if str(exception).strip()
            else type(exception).__name__,
        )
        if request.path.startswith("/api/"):
            response: HttpResponse = JsonResponse(
                {"detail": MESSAGE, "code": "database_unavailable"}, status=503
            )
        else:
            response = HttpResponse(PAGE, status=503, content_type="text/html; charset=utf-8")
        response["Retry-After"] = RETRY_AFTER
        return response
