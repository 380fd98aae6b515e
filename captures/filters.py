"""List filters shared by the viewer and the REST API (query-string parameters)."""

from __future__ import annotations

from datetime import UTC, datetime

from django.db.models import Q

PROTOCOLS = [("chat_completion", "OpenAI Chat Completions"), ("responses", "OpenAI Responses"),
             ("messages", "Anthropic Messages")]
STATUS_CLASSES = {"2xx": (200, 299), "4xx": (400, 499), "5xx": (500, 599)}


def parse_time(value: str | None) -> datetime | None:
    """ISO 8601 or the browser's ``datetime-local`` value; a time without a zone is UTC."""
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def apply(qs, params) -> tuple:
    """Filter ``qs`` by ``key`` (API key id), ``model`` (logical model, substring), ``protocol``,
    ``status`` (a code or 2xx/4xx/5xx), ``since``/``until`` and ``errors=1``. Returns the queryset
    and the cleaned values (for re-rendering the form); unparseable values are ignored."""
    cleaned: dict[str, str] = {}
    key = (params.get("key") or "").strip()
    if key.isdigit():
        qs = qs.filter(api_key_id=int(key))
        cleaned["key"] = key
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
    elif status.isdigit():
        qs = qs.filter(status=int(status))
        cleaned["status"] = status
    since = parse_time(params.get("since"))
    if since is not None:
        qs = qs.filter(created_at__gte=since)
        cleaned["since"] = params.get("since")
    until = parse_time(params.get("until"))
    if until is not None:
        qs = qs.filter(created_at__lte=until)
        cleaned["until"] = params.get("until")
    if (params.get("errors") or "").lower() in ("1", "true", "on", "yes"):
        qs = qs.filter(Q(is_error=True))
        cleaned["errors"] = "1"
    return qs, cleaned
