"""Writing a capture row: shared by the Celery task and the in-process writer."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

from captures.models import Capture

log = logging.getLogger("captures")


def save(meta: dict[str, Any], blob: bytes) -> Capture:
    """Insert one capture from its row metadata (``DumpMeta.as_dict()``) and compressed dump. The
    owner id is copied from the key now, so a later change of owner does not move old captures."""
    from keys.models import ApiKey

    key_id = meta.get("api_key_id")
    owner_id = None
    if key_id is not None:
        found = list(ApiKey.objects.filter(pk=key_id).values_list("owner_id", flat=True)[:1])
        if found:
            owner_id = found[0]
        else:
            key_id = None  # the key was deleted meanwhile: keep the capture, with the copied name
    cap = Capture.objects.create(
        request_id=meta["request_id"], client_request_id=(meta.get("client_request_id") or "")[:256],
        created_at=datetime.fromtimestamp(meta["created_at"], UTC),
        api_key_id=key_id, api_key_name=meta.get("api_key_name") or "", owner_id=owner_id,
        client_protocol=meta.get("client_protocol") or "", stream=bool(meta.get("stream")),
        logical_model=meta.get("logical_model") or "", status=min(int(meta.get("status") or 0), 32767),
        is_error=bool(meta.get("is_error")), attempt_count=min(int(meta.get("attempt_count") or 0), 32767),
        truncated=bool(meta.get("truncated")), raw_bytes=int(meta.get("raw_bytes") or 0),
        size_bytes=len(blob), payload=blob)
    return cap
