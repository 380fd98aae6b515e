"""The writer's half of recording (issue 20): turn what the recorder kept on the request path
(references to bytes and URP objects, compact tuples) into the JSON-able record the dump is
built from, exactly as the recorder used to build it in place.

Runs on the capture writer (``captures.sink``), never on the request path. Every URP object
is copied into fresh dicts and lists here, before anything masks a body in place, so masking the
upstream body cannot reach a URP object that shares a sub-dict with it.
"""

from __future__ import annotations

from typing import Any

import orjson

from captures.record import AttemptRecord, CaptureRecord
from gateway.urp.serialize import to_json_bytes

KEEP_TEXT = 65536  # characters of a non-JSON upstream body kept
_BYTES = (bytes, bytearray, memoryview)


def _json(value: Any) -> Any:
    """A URP object (or JSON-able data) as fresh JSON-able data."""
    if isinstance(value, Exception):  # the recorder could not snapshot it: the capture cannot be built
        raise value
    return orjson.loads(to_json_bytes(value))


def _body(raw: Any) -> Any:
    """Bytes that were sent or received as JSON, parsed; text when they are not JSON."""
    if not isinstance(raw, _BYTES):
        return raw
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return bytes(raw).decode("utf-8", "replace")


def _chain(entries: list[Any]) -> list[dict[str, Any]]:
    return [e.as_dict() if hasattr(e, "as_dict") else e for e in entries]


def _run(run: Any) -> Any:
    """One phase of per-rule states: ``(before, [(rule_id, scope, transform, phase, after)])``
    with JSON bytes -> ``{"before", "steps": [{..., "changed", "after"}]}``. A rule changed the
    state when the JSON differs (equal bytes: unchanged; different bytes are compared parsed, so
    a rule that only reorders keys is unchanged, as before)."""
    if not isinstance(run, tuple):
        return run
    before_raw, raw_steps = run
    before = orjson.loads(before_raw) if isinstance(before_raw, _BYTES) else _json(before_raw)
    last_raw, last = before_raw, before
    steps = []
    for rule_id, scope, transform, phase, after_raw in raw_steps:
        if isinstance(after_raw, Exception):
            raise after_raw
        changed = False
        if after_raw != last_raw:
            state = orjson.loads(after_raw)
            changed = state != last
            last = state
        last_raw = after_raw
        steps.append(
            {
                "rule_id": rule_id,
                "scope": scope,
                "transform": transform,
                "phase": phase,
                "changed": changed,
                "after": last if changed else None,
            }
        )
    return {"before": before, "steps": steps}


def _attempt(a: AttemptRecord) -> None:
    a.internal_request = None if a.internal_request is None else _json(a.internal_request)
    if a.response_after_chains is not None:  # the URP Response, or the list of stream events
        a.response_after_chains = _json(a.response_after_chains)
    if isinstance(a.upstream_request, _BYTES):
        a.upstream_request = _body(a.upstream_request)
    if isinstance(a.upstream_response, _BYTES):
        a.upstream_response = bytes(a.upstream_response[:KEEP_TEXT]).decode("utf-8", "replace")
    a.executed_chain = _chain(a.executed_chain)
    if a.rule_steps:
        a.rule_steps = {phase: _run(run) for phase, run in a.rule_steps.items()}


def materialize(record: CaptureRecord) -> CaptureRecord:
    """``record`` with every kept reference turned into JSON-able data (in place; returns it)."""
    if isinstance(record.client_request, _BYTES):
        raw = record.client_request
        record.client_request = (
            orjson.loads(raw) if record.client_request_json else (bytes(raw).decode("utf-8", "replace"))
        )
        record.client_request_json = False
    if record.model_from_body:
        model = record.client_request.get("model") if isinstance(record.client_request, dict) else None
        if isinstance(model, str):
            record.logical_model = model  # a request rejected before routing keeps its model
        record.model_from_body = False
    if isinstance(record.client_response, _BYTES):
        record.client_response = _body(record.client_response)
    for attempt in record.attempts:
        _attempt(attempt)
    return record
