"""List filters shared by the viewer and the REST API (query-string parameters)."""

from __future__ import annotations

from datetime import UTC, datetime

from django.db.models import Q

PROTOCOLS = [
    ("chat_completion", "OpenAI Chat Completions"),
    ("responses", "OpenAI Responses"),
    ("messages", "Anthropic Messages"),
]
STATUS_CLASSES = {"2xx": (200, 299), "4xx": (400, 499), "5xx": (500, 599)}


MAX_INT = 2**63 - 1  # the largest id or status a database column holds


class InvalidFilter(ValueError):
    """A filter value that parses but cannot be queried (an id above 2^63, a date that overflows
    when converted to UTC): the viewer and the REST API answer 400 instead of a 500."""

    def __init__(self, name: str, value: str) -> None:
        super().__init__(f"invalid value for {name!r}: {value[:64]!r}")
        self.name = name


def parse_time(value: str | None, name: str = "time") -> datetime | None:
    """ISO 8601 or the browser's ``datetime-local`` value; a time without a zone is UTC.
    Garbage is ignored (None); a date that overflows in UTC raises ``InvalidFilter``."""
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    if not parsed.tzinfo:
        parsed = parsed.replace(tzinfo=UTC)
    try:
        return parsed.astimezone(UTC)
    except OverflowError:
        raise InvalidFilter(name, value) from None


def _int(name: str, value: str) -> int | None:
    """An ASCII decimal within the database's range; None when not a number at all."""
    if not (value.isascii() and value.isdigit()):
        return None
    number = int(value)
    if number > MAX_INT:
        raise InvalidFilter(name, value)
    return number


def apply(qs, params) -> tuple:
    """Filter ``qs`` by ``key`` (API key id), ``model`` (logical model, substring), ``protocol``,
    ``status`` (a code or 2xx/4xx/5xx), ``since``/``until`` and ``errors=1``. Returns the queryset
    and the cleaned values (for re-rendering the form); unparseable values are ignored, values
    out of the database's range raise ``InvalidFilter`` (a 400)."""
    cleaned: dict[str, str] = {}
    key = (params.get("key") or "").strip()
    key_id = _int("key", key)
    if key_id is not None:
        qs = qs.filter(api_key_id=key_id)
        cleaned["key"] = key
    rid = (params.get("request_id") or "").strip()[:256]
    if rid:  # the gateway's id or the client's own x-request-id
        qs = qs.filter(Q(request_id=rid) | Q(client_request_id=rid))
        cleaned["request_id"] = rid
    model = (params.get("model") or "").strip()
    if model:
        qs = qs.filter(logical_model__icontains=model)
        cleaned["model"] = model
    protocol = (params.get("protocol") or "").strip()
    if protocol in dict(PROTOCOLS):
        qs = qs.filter(client_protocol=protocol)
        cleaned["protocol"] = protocol
    status = (params.get("status") or "").strip().lower()
    if status in STATUS_CLASSES:
        low, high = STATUS_CLASSES[status]
        qs = qs.filter(status__gte=low, status__lte=high)
        cleaned["status"] = status
    elif (code := _int("status", status)) is not None:
        qs = qs.filter(status=code)
        cleaned["status"] = status
    since = parse_time(params.get("since"), "since")
    if since is not None:
        qs = qs.filter(created_at__gte=since)
        cleaned["since"] = params.get("since")
    until = parse_time(params.get("until"), "until")
    if until is not None:
        qs = qs.filter(created_at__lte=until)
        cleaned["until"] = params.get("until")
    if (params.get("errors") or "").lower() in ("1", "true", "on", "yes"):
        qs = qs.filter(Q(is_error=True))
        cleaned["errors"] = "1"
    return qs, cleaned
