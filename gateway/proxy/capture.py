"""Filling a capture record on the request path (plain data, no ORM) and handing it to the sink
after the response is finished. Only reached when capture is on for the request: with capture
off the proxy never calls into this module."""

from __future__ import annotations

import logging
import time
from typing import Any

from captures import sink
from captures.record import AttemptRecord, CaptureRecord
from gateway.urp.serialize import to_jsonable

from .attempt import Attempt

log = logging.getLogger("gateway.proxy.capture")


def wanted(snapshot, key) -> bool:
    return snapshot.settings.capture_enabled and key.capture_mode in ("all", "abnormal")


def start(*, request_id: str, key, protocol: str, client_body: Any) -> CaptureRecord:
    return CaptureRecord(request_id=request_id, created_at=time.time(), api_key_id=key.id, api_key_name=key.name,
                         client_protocol=protocol, stream=False, logical_model="", client_request=client_body)


def attempt_record(att: Attempt, logical_model: str) -> AttemptRecord:
    return AttemptRecord(
        provider=att.provider.name, channel=att.channel.name, upstream_protocol=att.channel.protocol,
        logical_model=logical_model, upstream_model=att.upstream_model, started_at=att.started_at,
        internal_request=to_jsonable(att.request), upstream_request=att.body,
        executed_chain=[e.as_dict() for e in att.executed],
        # The attempt's own notes list: response-phase rules append to it later.
        notes=att.tctx.shared.setdefault("notes", []))


def finish(cap: CaptureRecord, *, mode: str, status: int, error: str | None, duration_ms: float) -> None:
    """Submit unless the key only wants abnormal requests and this one was normal (one
    attempt, no failure, client got 2xx, usage present)."""
    cap.client_status = status
    cap.error = cap.error or error
    cap.duration_ms = duration_ms
    if mode == "abnormal":
        abnormal = (len(cap.attempts) != 1 or any(a.error for a in cap.attempts) or status >= 400
                    or cap.error is not None or not cap.usage_seen)
        if not abnormal:
            return
    try:
        sink.submit(cap)
    except Exception:  # a capture must never affect the client
        log.warning("capture submit failed", exc_info=True)
