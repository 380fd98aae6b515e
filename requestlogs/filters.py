"""The request-log list filters, shared by the REST API and the admin changelist.

Query parameters (as the reference's list API):

- ``model``: comma-separated terms (at most 32), OR-ed; each a literal, case-insensitive
  substring of the logical or upstream model (``%`` and ``_`` match themselves);
- ``status``: ``success``, ``error`` or ``client_gone``;
- ``endpoint``: the endpoint answered, exactly (``/v1/chat/completions``, ``/v1/models``,
  ``other`` for unknown paths); ``error_code``: exactly (``unauthorized``, ``ip_not_allowed``);
- ``api_key`` (also ``key``): an API key id; ``owner``: a user id; ``username``: the owner's name;
- ``time_from`` (inclusive) and ``time_to`` (exclusive): ISO 8601 / RFC 3339; a time without a
  zone is UTC; ``time_from`` must be before ``time_to``;
- ``search``: substring of the request id (the gateway's, the echoed or the client's), the
  client IP, or the logical model.

Bad values are a :class:`FilterError` (the REST API answers 400 with the parameter named), never
a 500 and never silently ignored.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime

from django.db.models import Q, QuerySet

from requestlogs.models import Status

MAX_MODEL_TERMS = 32
MAX_ID = 2**63 - 1
MAX_TEXT = 256


class FilterError(ValueError):
    def __init__(self, param: str, code: str, message: str) -> None:
        super().__init__(message)
        self.param = param
        self.code = code
        self.message = message

    def as_dict(self) -> dict[str, str]:
        return {"code": self.code, "param": self.param, "detail": self.message}


def parse_id(param: str, value: str) -> int:
    value = value.strip()
    if not value.isascii() or not value.isdigit() or int(value) > MAX_ID:
        raise FilterError(param, "invalid_id", f"{param} must be a positive integer below 2^63")
    return int(value)


def parse_time(param: str, value: str) -> datetime:
    text = value.strip()
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
        parsed = parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
        return parsed.astimezone(UTC)  # an offset may push a date past the calendar's ends
    except (ValueError, OverflowError):
        raise FilterError(
            param,
            "invalid_time_filter",
            f"{param} must be an ISO 8601 date-time, such as 2026-01-31T12:00:00Z",
        ) from None


def model_terms(value: str) -> list[str]:
    terms = [t.strip() for t in value.split(",") if t.strip()]
    if len(terms) > MAX_MODEL_TERMS:
        raise FilterError(
            "model",
            "request_log_model_filter_too_many_terms",
            f"model takes at most {MAX_MODEL_TERMS} comma-separated terms",
        )
    if any(len(t) > MAX_TEXT for t in terms):
        raise FilterError(
            "model", "invalid_model_filter", f"a model term is longer than {MAX_TEXT} characters"
        )
    return terms


def by_status(qs: QuerySet, status: str) -> QuerySet:
    """Rows of one status. A failure status also says "not a success" in the index's own words:
    the status index is partial (``reqlog_unsuccessful``) and SQLite uses a partial index only
    when the query repeats its condition."""
    qs = qs.filter(status=status)
    return qs if status == Status.SUCCESS else qs.exclude(status=Status.SUCCESS)


def apply(qs: QuerySet, params: Mapping[str, str], *, staff: bool = True) -> QuerySet:
    """``qs`` filtered by ``params``; FilterError for a value that cannot be honoured. ``owner``
    and ``username`` are staff-only (a user sees only their own rows anyway)."""
    model = params.get("model")
    if model:
        terms = model_terms(model)
        if terms:
            q = Q()
            for term in terms:
                q |= Q(logical_model__icontains=term) | Q(upstream_model__icontains=term)
            qs = qs.filter(q)
    status = (params.get("status") or "").strip()
    if status:
        if status not in Status.values:
            raise FilterError(
                "status", "invalid_status", f"status must be one of: {', '.join(Status.values)}"
            )
        qs = by_status(qs, status)
    for param in ("endpoint", "error_code"):
        value = (params.get(param) or "").strip()
        if len(value) > MAX_TEXT:
            raise FilterError(param, f"invalid_{param}", f"{param} is longer than {MAX_TEXT} characters")
        if value:
            qs = qs.filter(**{param: value})
    for param in ("api_key", "key"):
        if (params.get(param) or "").strip():
            qs = qs.filter(api_key_id=parse_id(param, params[param]))
    if staff and (params.get("owner") or "").strip():
        qs = qs.filter(owner_id=parse_id("owner", params["owner"]))
    if staff and (params.get("username") or "").strip():
        from django.contrib.auth import get_user_model

        users = get_user_model()
        ids = users.objects.filter(**{users.USERNAME_FIELD: params["username"].strip()}).values("pk")
        qs = qs.filter(owner_id__in=ids)
    since = until = None
    if (params.get("time_from") or "").strip():
        since = parse_time("time_from", params["time_from"])
        qs = qs.filter(created_at__gte=since)
    if (params.get("time_to") or "").strip():
        until = parse_time("time_to", params["time_to"])
        qs = qs.filter(created_at__lt=until)
    if since is not None and until is not None and since >= until:
        raise FilterError("time_from", "invalid_time_filter", "time_from must be before time_to")
    search = (params.get("search") or "").strip()
    if search:
        if len(search) > MAX_TEXT:
            raise FilterError("search", "invalid_search", f"search is longer than {MAX_TEXT} characters")
        qs = qs.filter(
            Q(request_id__icontains=search)
            | Q(x_request_id__icontains=search)
            | Q(client_request_id__icontains=search)
            | Q(client_ip__icontains=search)
            | Q(logical_model__icontains=search)
        )
    return qs
