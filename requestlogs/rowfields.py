"""The fields of a request-log row in the order the recorder gives its values: shared by the
recorder, the hand-off (the Celery task and the spool take dicts) and the insert (by position)."""

from __future__ import annotations

from typing import Any

# In the order of ``requestlogs.recorder.RequestLogRecorder.values``. ``request_id`` is the
# gateway's own id (issue 13, also the capture's identity); ``x_request_id`` the id echoed in
# x-request-id (the client's when it sent a sane one).
ROW_FIELDS = (
    "request_id",
    "x_request_id",
    "client_request_id",
    "created_at",
    "api_key_id",
    "api_key_name",
    "client_protocol",
    "endpoint",
    "stream",
    "client_ip",
    "logical_model",
    "upstream_model",
    "provider",
    "channel",
    "provider_ref",
    "channel_ref",
    "attempts",
    "affinity",
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "reasoning_tokens",
    "cost_nano",
    "cost_estimated",
    "status",
    "http_status",
    "error_code",
    "error_message",
    "duration_ms",
    "ttfb_ms",
    "has_capture",
)


def as_dict(row: Any) -> dict[str, Any]:
    """A row as a dict: a recorder's values tuple zipped with the field names, a dict as it is."""
    return row if type(row) is dict else dict(zip(ROW_FIELDS, row, strict=True))
