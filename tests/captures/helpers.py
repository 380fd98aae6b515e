"""Building capture records and stored captures for the capture tests."""

from __future__ import annotations

import time
from typing import Any

from captures import dump, store
from captures.record import AttemptRecord, CaptureRecord


def attempt(**fields: Any) -> AttemptRecord:
    base = {
        "provider": "acme",
        "channel": "main",
        "upstream_protocol": "chat_completion",
        "logical_model": "gpt-4o",
        "upstream_model": "up-4o",
        "started_at": time.time(),
    }
    base.update(fields)
    return AttemptRecord(**base)


def record(
    request_id: str = "req-1", *, key=None, attempts: int = 1, status: int = 200, **fields: Any
) -> CaptureRecord:
    base = {
        "request_id": request_id,
        "created_at": time.time(),
        "api_key_id": key.pk if key else None,
        "api_key_name": key.name if key else "",
        "client_protocol": "chat_completion",
        "stream": False,
        "logical_model": "gpt-4o",
    }
    base.update(fields)
    rec = CaptureRecord(**base)
    rec.client_status = status
    rec.client_request = rec.client_request or {
        "model": "gpt-4o",
        "messages": [{"role": "user", "content": "hi"}],
    }
    for n in range(attempts):
        a = attempt()
        a.upstream_request = {
            "model": "up-4o",
            "messages": [
                {"role": "system", "content": "Answer in French."},
                {"role": "user", "content": "hi"},
            ],
        }
        a.upstream_response = {
            "id": "x",
            "choices": [{"message": {"role": "assistant", "content": "Bonjour"}}],
        }
        a.executed_chain = [
            {
                "scope": "provider",
                "transform": "prompt_inject_system",
                "phase": "request",
                "rule_id": 7,
                "config": {"content": "secret judge key"},
            }
        ]
        a.upstream_status = 200 if n == attempts - 1 else 500
        rec.attempts.append(a)
    rec.client_response = {"id": "x", "choices": [{"message": {"role": "assistant", "content": "Bonjour"}}]}
    return rec


def stored(rec: CaptureRecord, created_at: float | None = None):
    """Persist ``rec`` the way the writers do; returns the Capture row."""
    if created_at is not None:
        rec.created_at = created_at
    data, meta = dump.build(rec)
    return store.save(meta.as_dict(), dump.compress(data))
