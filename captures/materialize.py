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


class Encoded(bytes):
    """A payload already serialized as compact JSON exactly as ``orjson.dumps`` writes it (the
    dump embeds these bytes as they are; parsing and re-encoding them gave the same bytes and was
    a third of ``prepare``). Only bytes that orjson itself wrote are marked: a client's own body
    may have other spacing or escapes, which the secret and image screens do not expect."""


def _json(value: Any) -> Encoded:
    """A URP object (or JSON-able data) as its JSON bytes (a copy: rules may mutate it later)."""
    if isinstance(value, Exception):  # the recorder could not snapshot it: the capture cannot be built
        raise value
    if isinstance(value, Encoded):  # materialized already
        return value
    return Encoded(to_json_bytes(value))


def _body(raw: Any) -> Any:
    """Bytes that were sent or received as JSON, parsed; text when they are not JSON."""
    if not isinstance(raw, _BYTES):
        return raw
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return bytes(raw).decode("utf-8", "replace")


def _chain(entries: list[Any]) -> Any:
    """The executed chain: ``ExecutedRule`` entries straight to JSON bytes (their ``as_dict`` is
    exactly the four keys the dump keeps); plain dicts (tests, replays) are left to the dump."""
    if all(hasattr(e, "as_dict") for e in entries):
        return Encoded(orjson.dumps([e.as_dict() for e in entries]))
    return [e.as_dict() if hasattr(e, "as_dict") else e for e in entries]


_UNPARSED = object()


def _run(run: Any) -> bytes:
    """One phase of per-rule states: ``(before, [(rule_id, scope, transform, phase, after)])``
    with JSON bytes -> the bytes of ``{"before", "steps": [{..., "changed", "after"}]}``, the
    states spliced in as the recorder wrote them (they were parsed and re-encoded). A rule changed
    the state when the JSON differs (equal bytes: unchanged; different bytes are compared parsed,
    so a rule that only reorders keys is unchanged, as before)."""
    if not isinstance(run, tuple):
        return orjson.dumps(run)
    before_raw, raw_steps = run
    before = bytes(before_raw) if isinstance(before_raw, _BYTES) else _json(before_raw)
    last_raw: Any = before_raw
    last: Any = _UNPARSED
    steps = []
    for rule_id, scope, transform, phase, after_raw in raw_steps:
        if isinstance(after_raw, Exception):
            raise after_raw
        changed = False
        if after_raw != last_raw:
            if last is _UNPARSED:
                last = orjson.loads(bytes(before))
            state = orjson.loads(after_raw)
            changed = state != last
            last = state
        last_raw = after_raw
        head = orjson.dumps(
            {"rule_id": rule_id, "scope": scope, "transform": transform, "phase": phase, "changed": changed}
        )
        steps.append(head[:-1] + b',"after":' + (bytes(after_raw) if changed else b"null") + b"}")
    return b'{"before":' + before + b',"steps":[' + b",".join(steps) + b"]}"


def _steps(rule_steps: dict[str, Any]) -> Encoded:
    """Every phase's states as one JSON object's bytes."""
    parts = [orjson.dumps(str(phase)) + b":" + _run(run) for phase, run in rule_steps.items()]
    return Encoded(b"{" + b",".join(parts) + b"}")


def _attempt(a: AttemptRecord) -> None:
    a.internal_request = None if a.internal_request is None else _json(a.internal_request)
    if a.response_after_chains is not None:  # the URP Response, or the list of stream events
        a.response_after_chains = _json(a.response_after_chains)
    if isinstance(a.upstream_request, _BYTES):
        a.upstream_request = _body(a.upstream_request)
    if isinstance(a.upstream_response, _BYTES):
        a.upstream_response = bytes(a.upstream_response[:KEEP_TEXT]).decode("utf-8", "replace")
    if not isinstance(a.executed_chain, Encoded):
        a.executed_chain = _chain(a.executed_chain)
    if a.rule_steps and not isinstance(a.rule_steps, Encoded):
        a.rule_steps = _steps(a.rule_steps)


def _decoded(value: Any) -> Any:
    return orjson.loads(bytes(value)) if isinstance(value, Encoded) else value


def materialize(record: CaptureRecord, *, encoded: bool = False) -> CaptureRecord:
    """``record`` with every kept reference turned into JSON-able data (in place; returns it; a
    second call changes nothing). ``encoded=True`` (the dump): the URP objects, the executed
    chain and the per-rule states are left as :class:`Encoded` JSON bytes instead, which the
    dump embeds as they are."""
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
    for a in record.attempts:
        _attempt(a)
        if not encoded:
            a.internal_request = _decoded(a.internal_request)
            a.response_after_chains = _decoded(a.response_after_chains)
            a.executed_chain = _decoded(a.executed_chain)
            a.rule_steps = _decoded(a.rule_steps)
    return record
