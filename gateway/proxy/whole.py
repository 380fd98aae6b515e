"""The whole-response path: fetch a whole upstream answer (a JSON body, or a forced upstream
stream collected into one ``Response``), run the response rules on it, and answer the client
either with one JSON body or with a stream synthesised from it.

==================  =================  ==============================================
client              upstream           path
==================  =================  ==============================================
whole               whole              decode_response -> rules -> encode_response
whole               stream (forced)    SSE collected into a Response first
stream              whole              rules need the whole response (or a rule turned
                                       streaming off): synthesised stream from the Response
==================  =================  ==============================================
"""

from __future__ import annotations

import time
from typing import Any

import orjson

from gateway.errors import AttemptFailed, UpstreamProtocolError
from gateway.protocols import codec
from gateway.protocols.base import EncodeContext
from gateway.protocols.json_depth import MAX_DEPTH, too_deep
from gateway.protocols.sse import SSELineTooLong, SSEParser
from gateway.urp import Response
from gateway.urp import events as ev
from gateway.urp.synth import response_to_events

from .attempt import Attempt
from .call import MAX_ERROR_BODY, MAX_UPSTREAM_BODY, Call
from .chain import RuleTrace, run_response_async, wrap_stream_encoder
from .errors import from_stream_error, is_retryable_status, mask, status_failure, transport_failure
from .recorder import Recorder
from .upstream import TRANSPORT_ERRORS


async def read_bounded(resp: Any, limit: int) -> bytes:
    """The upstream body, refusing (a failed attempt) once it exceeds ``limit`` bytes.

    The limit counts decompressed bytes: ``Content-Length`` of a gzip answer is its compressed
    size (issue 13: 0.5 MB became 512 MB), so the one-read shortcut is only for bodies sent as
    they are; a compressed body is read chunk by chunk (aiohttp inflates in bounded steps)."""
    length = resp.content_length
    encoding = resp.headers.get("Content-Encoding", "").strip().lower()
    if length is not None and length <= limit and encoding in ("", "identity"):
        return await resp.read()
    chunks, size = [], 0
    async for chunk in resp.content.iter_any():
        size += len(chunk)
        if size > limit:
            raise AttemptFailed("upstream response too large", code="upstream_response_too_large")
        chunks.append(chunk)
    return b"".join(chunks)


def collect_sse(att: Attempt, data: bytes, rec: Recorder) -> Response:
    """A streamed upstream answer folded into one Response (``ResponseDone.output`` is
    authoritative)."""
    decoder = att.codec.StreamDecoder()
    parser = SSEParser()
    events: list[ev.Event] = []
    try:
        frames = list(parser.feed(data)) + list(parser.close())
    except SSELineTooLong as exc:
        raise AttemptFailed(
            f"upstream stream rejected: {exc}", code="upstream_stream_error", status=502, retryable=True
        ) from None
    for name, payload in frames:
        rec.on_upstream_frame(name, payload)
        events.extend(decoder.feed(name, payload))
        if decoder.finished:
            break
    if not decoder.finished:
        events.extend(decoder.close())
    start = None
    for event in events:
        if isinstance(event, ev.ResponseStart):
            start = event
        elif isinstance(event, ev.StreamError):
            raise from_stream_error(event, att.secrets)
        elif isinstance(event, ev.ResponseDone):
            return Response(
                id=start.id if start else "",
                model=start.model if start else att.upstream_model,
                output=list(event.output),
                finish_reason=event.finish_reason,
                usage=event.usage,
                created=start.created if start else None,
                extra=dict(event.extra),
            )
    raise AttemptFailed(
        "upstream stream ended without a response", code="upstream_stream_incomplete", retryable=True
    )


def decode_whole(att: Attempt, data: bytes, ctype: str, rec: Recorder) -> Response:
    """A successful upstream body as a Response; AttemptFailed when it cannot be read."""
    resp = _decode_whole(att, data, ctype, rec)
    att.response_id, att.completed = resp.id, True  # what sticky routing binds after the answer
    return resp


def _decode_whole(att: Attempt, data: bytes, ctype: str, rec: Recorder) -> Response:
    if att.upstream_stream and (ctype == "text/event-stream" or data[:6] in (b"data: ", b"event:")):
        return collect_sse(att, data, rec)
    try:
        body = orjson.loads(data)
    except orjson.JSONDecodeError:
        rec.on_upstream_body(data)
        raise AttemptFailed(
            "upstream returned a body that is not JSON", code="invalid_upstream_response"
        ) from None
    if too_deep(body, data):
        raise AttemptFailed(
            f"upstream response is nested more than {MAX_DEPTH} levels deep", code="invalid_upstream_response"
        )
    rec.on_upstream_body(body)
    try:
        return att.codec.decode_response(body)
    except UpstreamProtocolError as exc:
        retryable = exc.status is not None and is_retryable_status(exc.status)
        raise AttemptFailed(
            f"upstream error: {mask(exc.message, att.secrets)}",
            status=exc.status,
            code=exc.code,
            error_type=exc.error_type,
            retryable=retryable,
            rate_limited=exc.status == 429,
        ) from None


async def fetch_whole(call: Call, att: Attempt) -> Response:
    """POST the attempt and read the whole answer; counts a success for the breaker."""
    ex = call.ex
    t = time.perf_counter()
    try:
        async with call.rt.client.post(
            att.url,
            att.raw,
            att.headers,
            total=att.total_timeout,
            connect=att.connect_timeout,
            sock_read=None,
        ) as resp:
            status = resp.status
            ctype = resp.content_type
            retry_after = resp.headers.get("retry-after") if status == 429 else None
            data = await read_bounded(resp, MAX_UPSTREAM_BODY if status < 300 else MAX_ERROR_BODY)
    except AttemptFailed:
        raise
    except TRANSPORT_ERRORS as exc:
        raise transport_failure(exc, att.secrets) from None
    finally:
        ex.upstream_wait += time.perf_counter() - t
    call.rec.on_upstream_response(status, t)
    if status >= 300:
        call.rec.on_upstream_body(data)
        raise status_failure(status, data, att.secrets, retry_after)
    resp_obj = decode_whole(att, data, ctype, call.rec)
    if att.provider.circuit_breaker_enabled:
        call.rt.breaker.record_success(att.channel.id)
    return resp_obj


def _trace(call: Call, att: Attempt) -> RuleTrace | None:
    """The recorders' tracer for the response chain; none for an empty chain (nothing to trace:
    a capture would snapshot the whole response for no rule)."""
    return call.rec.rule_trace() if att.response_rules else None


async def whole_one(call: Call, att: Attempt) -> None:
    """One attempt for a client that wants a whole response."""
    resp = await fetch_whole(call, att)
    executed = await run_response_async(att.response_rules, resp, att.tctx, _trace(call, att))
    ccodec = codec(call.ex.protocol)
    out = ccodec.encode_response(
        resp, EncodeContext(model=call.logical_model, source_protocol=att.channel.protocol)
    )
    raw = orjson.dumps(out)
    call.rec.on_response(resp, executed)
    await call.ex.send_bytes(200, raw)


async def synth_one(call: Call, att: Attempt) -> None:
    """One attempt for a streaming client whose upstream call is not streamed."""
    resp = await fetch_whole(call, att)
    await emit_whole(call, att, resp)


async def emit_whole(call: Call, att: Attempt, resp: Response) -> None:
    """A whole response -> response rules -> synthesised events -> the client's stream."""
    executed = await run_response_async(att.response_rules, resp, att.tctx, _trace(call, att))
    events = response_to_events(resp)
    # Response rules may wrap the client's encoder (the stream-encoder hook).
    enc = wrap_stream_encoder(att.response_rules, call.new_encoder(att.channel.protocol), att.tctx)
    out = b"".join(enc.encode(event) for event in events) + enc.close()
    call.rec.on_response(resp, executed)
    call.ex.encoder = enc
    await call.ex.write(out)
    await call.ex.end_stream()
