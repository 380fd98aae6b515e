"""Decode and serve: the generation endpoints' pipeline after authentication.

``serve`` picks the request's recorder, decodes (``decode_call``: JSON, codec, key policy),
then runs the failover loop (``failover.route``) with the whole-response path
(``whole.whole_one``) or the streaming path (``stream.stream_one``). Every failure reaches the
client in its protocol's shape, as a JSON error or, once the SSE response is committed, as the
protocol's error frames.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from gateway.errors import ClientError, ProtocolError
from gateway.protocols import codec
from gateway.protocols.json_depth import MAX_DEPTH, loads_checked
from gateway.urp import events as ev

from . import effort_suffix, offload
from .admission import Admission
from .call import Call, Runtime
from .errors import to_client_error
from .exchange import Exchange, keepalive_loop
from .failover import route
from .recorder import NULL_RECORDER, FanOutRecorder, Recorder
from .routing import model_allowed, resolve_logical_model
from .snapshot import KeySnap, Snapshot
from .stream import stream_one
from .usage_tap import UsageTap
from .whole import whole_one

log = logging.getLogger("gateway.proxy")


async def serve(rt: Runtime, ex: Exchange, snapshot: Snapshot, key: KeySnap, raw_body: bytes) -> None:
    """Answer one generation request. Every failure reaches the client in its protocol's shape."""
    if key.limits is not None and key.limits.counted:
        await _serve_limited(rt, ex, snapshot, key, raw_body)
        return
    rec = rt.recorders.start(ex, snapshot, key, raw_body)
    await _serve(rt, ex, snapshot, key, raw_body, rec)


async def _serve_limited(
    rt: Runtime, ex: Exchange, snapshot: Snapshot, key: KeySnap, raw_body: bytes
) -> None:
    """A key with counted limits. The admission starts before anything is decoded and is
    awaited before anything is sent upstream or to the client (``admission.Admission``), so its
    Redis round trip overlaps the decoding and the attempt's preparation; a refusal is the
    answer (429/402) whatever else the request had wrong. The concurrency slot is freed and the
    tokens settled when the answer is over, in a task that the next request does not wait for."""
    limits = key.limits
    assert limits is not None
    admission = rt.limiter.begin(key.id, limits, time.time())
    refused = admission.result
    if isinstance(refused, ClientError):  # known at once (counted in this worker's memory)
        rec = rt.recorders.start(ex, snapshot, key, raw_body)
        await ex.send_error(refused)
        rec.on_finish(ex, f"{refused.code}: {refused.message}")
        return
    tap = UsageTap()
    rec = rt.recorders.start(ex, snapshot, key, raw_body)
    rec = tap if rec is NULL_RECORDER else FanOutRecorder((rec, tap))  # no fan-out for one
    try:
        await _serve(rt, ex, snapshot, key, raw_body, rec, admission)
    finally:  # after the answer's last byte: freed and settled off the request's path
        admission.end(tap)


async def _serve(
    rt: Runtime,
    ex: Exchange,
    snapshot: Snapshot,
    key: KeySnap,
    raw_body: bytes,
    rec: Recorder,
    admission: Admission | None = None,
) -> None:
    ex.recorder = rec
    error_text = None
    try:
        parsed = None
        if offload.wants_offload(raw_body, rt.offload_json_bytes):
            parsed = await offload.parse(raw_body)  # a large body: parsed off the event loop
        call = decode_call(rt, ex, snapshot, key, raw_body, rec, parsed)
        call.admission = admission
        if call.client_stream:
            await _serve_stream(call)
        else:
            await route(call, whole_one)
    except asyncio.CancelledError:
        if ex.client_gone:  # cancelled because the client left (app.py): recorded as such
            error_text = "client_gone: the client disconnected before the answer was complete"
            if not ex.headers_sent:
                ex.status = 499
        raise
    except Exception as exc:
        err = to_client_error(exc)
        if admission is not None and not ex.headers_sent:  # a refusal comes before any other answer
            err = await admission.verdict() or err
        error_text = f"{err.code}: {err.message}"
        if not ex.headers_sent:
            await ex.send_error(err)
        elif not ex.finished:
            await stream_error(ex, err)
    finally:
        rec.on_finish(ex, error_text)
        # The recorders hold the exchange (and the attempt: URP, upstream body) and the exchange
        # held them: a cycle that kept a 1 MB request's objects until a full GC pass instead of
        # freeing them here (bench/AGENT_REQUESTS.md).
        ex.recorder = NULL_RECORDER


def decode_call(
    rt: Runtime,
    ex: Exchange,
    snapshot: Snapshot,
    key: KeySnap,
    raw_body: bytes,
    rec: Recorder = NULL_RECORDER,
    parsed: tuple[str, Any] | None = None,
) -> Call:
    """The client's body decoded and checked against the key's policy; ClientError otherwise.
    ``parsed``: ``loads_checked(raw_body)`` when the caller already has it (a large body,
    parsed off the event loop: ``offload``)."""
    status, body = parsed if parsed is not None else loads_checked(raw_body)
    if status == "invalid":
        raise ClientError(400, "invalid_request", "request body is not valid JSON")
    if status == "notobject":
        raise ClientError(400, "invalid_request", "request body must be a JSON object")
    if status == "deep":  # would parse, but no encoder could write it again
        raise ClientError(400, "invalid_request", f"request body is nested more than {MAX_DEPTH} levels deep")
    rec.on_request_body(raw_body)
    try:
        req = codec(ex.protocol).decode_request(body)
    except ProtocolError as exc:
        raise ClientError(400, "invalid_request", exc.message, param=exc.param) from None
    if not isinstance(req.model, str) or not req.model:
        raise ClientError(400, "invalid_request", "model is required", param="model")
    logical = resolve_logical_model(key, req.model, snapshot.settings.redirects)
    logical = effort_suffix.apply(req, logical, snapshot.routes, snapshot.settings.effort_suffixes)
    if not model_allowed(key, logical):
        raise ClientError(
            403,
            "model_not_allowed",
            f"model {logical!r} is not allowed for this API key",
            error_type="permission_error",
        )
    include_usage = True
    if ex.protocol in ("chat_completion", "completions"):
        so = body.get("stream_options")
        include_usage = isinstance(so, dict) and bool(so.get("include_usage"))
    call = Call(
        rt=rt,
        ex=ex,
        snapshot=snapshot,
        key=key,
        req=req,
        logical_model=logical,
        client_stream=bool(req.stream),
        include_usage=include_usage,
        raw_body=raw_body,
        rec=rec,
    )
    rec.on_request_decoded(call)
    return call


async def _serve_stream(call: Call) -> None:
    ex = call.ex
    ex.start_stream()
    ex.encoder = call.new_encoder(None)  # keep-alives and pre-stream errors until an attempt commits
    keepalive = _KeepAlive(call)
    try:
        await route(call, stream_one)
    finally:
        keepalive.cancel()


class _KeepAlive:
    """A stream's keep-alive comments. The task starts only when a keep-alive is first due: a
    stream whose first event comes sooner (nearly all) pays a timer, not a task start before its
    upstream call. An object rather than a closure: a closure over the stream's state kept seven
    cells, a function and a list alive (and for the collector to scan) for every open stream."""

    __slots__ = ("call", "interval", "timer", "task")

    def __init__(self, call: Call) -> None:
        self.call = call
        self.interval = call.rt.keepalive_seconds
        self.task: asyncio.Task | None = None
        self.timer = asyncio.get_running_loop().call_later(self.interval, self._due)

    def _due(self) -> None:
        call = self.call
        if call.ex.finished:
            return
        loop = asyncio.get_running_loop()
        admission = call.admission
        if admission is not None and admission.result is not None:  # not admitted (yet): no bytes
            self.timer = loop.call_later(self.interval, self._due)
            return
        self.task = loop.create_task(keepalive_loop(call.ex, self.interval))

    def cancel(self) -> None:
        self.timer.cancel()
        if self.task is not None:
            self.task.cancel()


async def stream_error(ex: Exchange, err: ClientError) -> None:
    """An error once the SSE response is committed: pre-stream frames when no data was sent,
    else the protocol's mid-stream error event."""
    enc = ex.encoder
    try:
        if ex.data_sent:
            data = enc.encode(ev.StreamError(message=err.message, code=err.code, status=err.status))
        else:
            data = enc.error(err.status, err.code, err.message)
    except Exception:
        log.exception("stream encoder failed to encode an error")
        data = b""
    await ex.write(data, is_data=ex.data_sent)
    await ex.end_stream()
