"""REST API errors as field-level JSON; never a 500 with a stack trace for bad input."""

import logging

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import InterfaceError, OperationalError
from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_handler

log = logging.getLogger("gateway.api")


def exception_handler(exc, context):
    if isinstance(exc, DjangoValidationError):
        detail = exc.message_dict if hasattr(exc, "error_dict") else {"non_field_errors": exc.messages}
        return Response(detail, status=status.HTTP_400_BAD_REQUEST)
    if isinstance(exc, OperationalError | InterfaceError):  # the database is down: say so (gateway.dbdown)
        from gateway.dbdown import MESSAGE, RETRY_AFTER

        log.error("database unreachable: REST API answered 503 (%s)", type(exc).__name__)
        return Response(
            {"detail": MESSAGE, "code": "database_unavailable"},
            status=503,
            headers={"Retry-After": RETRY_AFTER},
        )
    response = drf_handler(exc, context)
    if response is None:
        log.exception("unhandled REST API error")
        return Response({"detail": "Internal error."}, status=status.HTTP_500_INTERNAL_SERVER_ERROR)
    return response
