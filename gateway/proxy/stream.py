"""The streaming path: upstream SSE -> decoder -> StreamChain -> encoder -> client, chunk by
chunk (``StreamPump``), or the whole-response path when the upstream is not streamed.

Failover stays possible until protocol data reached the client ("committed"): before that an
upstream error raises AttemptFailed; after it, the client gets its protocol's error event.
Keep-alives may commit the 200 SSE response earlier without ending failover; errors then go as
the encoder's pre-stream error frames."""

from __future__ import annotations

import asyncio
import logging
import math
import time
from typing import Any

from gateway.errors import TransformFailed, TransformRejected
from gateway.protocols.sse import SSELineTooLong, SSEParser
from gateway.urp import events as ev

from .attempt import Attempt
from .call import MAX_ERROR_BODY, MAX_UPSTREAM_BODY, Call
from .chain import StreamChain, wrap_stream_encoder
from .errors import (
    from_stream_error,
    mask,
    masked_stream_error,
    status_failure,
    to_client_error,
    transport_failure,
)
from .recorder import hook_of
from .upstream import TRANSPORT_ERRORS
from .whole import decode_whole, emit_whole, read_bounded, synth_one

log = logging.getLogger("gateway.proxy")

# After a stream's terminal event: how long and how much of the rest of the upstream body is read
# so that its connection can be reused (``StreamPump._drain``); past either, it is closed.
DRAIN_SECONDS = 0.25
DRAIN_BYTES = 65536


async def stream_one(call: Call, att: Attempt) -> None:
    """One attempt for a streaming client."""
    if not att.upstream_stream:
        await synth_one(call, att)
        return
    ex = call.ex
    t = time.perf_counter()
    limits = StreamLimits(call, att)
    try:
        async with asyncio.timeout_at(limits.before_content()):  # the first byte is due in time too
            resp = await call.rt.client.post(
                att.url,
                att.raw,
                att.headers,
                total=None,
                connect=att.connect_timeout,
                sock_read=att.idle_timeout,
            )
    except TRANSPORT_ERRORS as exc:
        raise transport_failure(exc, att.secrets) from None
    finally:
        ex.upstream_wait += time.perf_counter() - t
    eof = False
    try:
        call.rec.on_upstream_response(resp.status, t)  # upstream headers arrived
        if resp.status >= 300:
            data = await _read_timed(ex, resp, MAX_ERROR_BODY, swallow=True, secrets=att.secrets)
            call.rec.on_upstream_body(data)
            raise status_failure(resp.status, data, att.secrets, resp.headers.get("retry-after"))
        if resp.content_type == "application/json":  # the upstream ignored stream=true
            data = await _read_timed(ex, resp, MAX_UPSTREAM_BODY, swallow=False, secrets=att.secrets)
            eof = True
            att.upstream_stream = False
            whole = decode_whole(att, data, resp.content_type, call.rec)
            if att.provider.circuit_breaker_enabled:
                call.rt.breaker.record_success(att.channel.id)
            await emit_whole(call, att, whole)
            return
        eof = await StreamPump(call, att, resp, limits).run()
    finally:
        if eof:
            resp.release()
        else:
            resp.close()  # mid-body: drop the connection rather than return it to the pool


class StreamLimits:
    """A stream's deadlines on the loop clock (issue 13): the first content event within the
    first-byte timeout, no gap between upstream events longer than the idle timeout (keep-alive
    comments and pings do not reset it, so an upstream that drips bytes cannot hold a stream
    forever), and the whole stream within the total cap.

    The reads are timed by one timer for the whole stream (``arm``/``disarm``), not by an
    ``asyncio.timeout_at`` per upstream chunk: that made and cancelled a timer handle, a
    ``Timeout`` and their bookkeeping for every event (~11 µs on uvloop, more than half of the
    Python an event otherwise costs, bench/STREAMS.md), and kept them alive while the stream
    waited, so 1,000 paced streams filled the young GC generations with them. The deadline only
    moves later as events arrive, so the timer stays where it is and, when it fires early,
    re-arms itself at the read's deadline; an earlier deadline re-arms it at once. Same rules as
    ``asyncio.timeout_at``: a read that returns without waiting is never cut, and a cancellation
    that is not the deadline's (the client left) is not taken for a timeout."""

    __slots__ = (
        "loop",
        "first_deadline",
        "total_deadline",
        "idle",
        "last_event",
        "first",
        "total",
        "timer",
        "timer_at",
        "task",
        "read_deadline",
        "reading",
        "cancels",
        "fired",
    )

    def __init__(self, call: Call, att: Attempt) -> None:
        rt = call.rt
        self.loop = asyncio.get_running_loop()
        now = self.loop.time()
        self.first = rt.stream_first_byte_timeout or att.total_timeout or 0.0
        self.total = rt.stream_max_seconds or 0.0
        self.idle = rt.stream_idle_timeout or att.idle_timeout or 0.0
        self.first_deadline = now + self.first if self.first > 0 else math.inf
        self.total_deadline = now + self.total if self.total > 0 else math.inf
        self.last_event = now
        self.timer: asyncio.TimerHandle | None = None
        self.timer_at = math.inf
        self.task: asyncio.Task | None = None
        self.read_deadline = math.inf
        self.reading = False
        self.cancels = 0  # the task's pending cancellations when the read began
        self.fired = False

    def before_content(self) -> float | None:
        deadline = min(self.first_deadline, self.total_deadline)
        return None if deadline == math.inf else deadline

    def next_deadline(self, committed: bool) -> float | None:
        deadline = self.total_deadline
        if not committed:
            deadline = min(deadline, self.first_deadline)
        if self.idle > 0:
            deadline = min(deadline, self.last_event + self.idle)
        return None if deadline == math.inf else deadline

    def arm(self, committed: bool) -> bool:
        """Before an upstream read: time it against ``next_deadline``; False when nothing limits
        it (the read is not timed, and ``disarm`` need not be called)."""
        deadline = self.next_deadline(committed)
        if deadline is None:
            return False
        task = self.task
        if task is None:
            task = self.task = asyncio.current_task()
        self.read_deadline = deadline
        self.reading = True
        self.cancels = task.cancelling()  # type: ignore[union-attr]
        if self.timer is None or self.timer_at > deadline:
            if self.timer is not None:
                self.timer.cancel()
            self.timer_at = deadline
            self.timer = self.loop.call_at(deadline, self._fire)
        return True

    def disarm(self) -> None:
        self.reading = False

    def _fire(self) -> None:
        self.timer = None
        if not self.reading:  # between reads: the next ``arm`` sets the timer again
            return
        if self.loop.time() < self.read_deadline:  # events moved the deadline since it was set
            self.timer_at = self.read_deadline
            self.timer = self.loop.call_at(self.read_deadline, self._fire)
            return
        self.fired = True
        self.task.cancel()  # type: ignore[union-attr]

    def timed_out(self) -> bool:
        """After a read raised ``CancelledError``: whether the deadline did it (and no other
        cancellation is pending), in which case the cancellation is withdrawn."""
        if not self.fired:
            return False
        self.fired = False
        return self.task.uncancel() <= self.cancels  # type: ignore[union-attr]

    def close(self) -> None:
        """The stream is over: its timer must not keep the stream alive until it fires."""
        self.reading = False
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def expired(self, committed: bool) -> ev.StreamError:
        """The error for a read that timed out: which limit ran out."""
        now = self.loop.time()
        if now >= self.total_deadline:
            return ev.StreamError(
                message=f"upstream stream exceeded {self.total:g} s",
                code="upstream_stream_timeout",
                status=504,
            )
        if not committed and now >= self.first_deadline:
            return ev.StreamError(
                message=f"upstream sent no content within {self.first:g} s",
                code="upstream_first_byte_timeout",
                status=504,
            )
        return ev.StreamError(
            message="upstream stream idle timeout", code="upstream_idle_timeout", status=504
        )


async def _read_timed(
    ex: Any, resp: Any, limit: int, *, swallow: bool, secrets: tuple[str, ...] = ()
) -> bytes:
    """A whole upstream body, counted as upstream wait. ``swallow``: a transport error gives an
    empty body (an error answer is being read anyway) instead of a failed attempt."""
    t = time.perf_counter()
    try:
        return await read_bounded(resp, limit)
    except TRANSPORT_ERRORS as exc:
        if swallow:
            return b""
        raise transport_failure(exc, secrets) from None
    finally:
        ex.upstream_wait += time.perf_counter() - t


class StreamPump:
    """Relays one upstream SSE response to the client. ``run`` returns True when the upstream
    body was read to its end.

    Events before the first content event (``ResponseStart``, provider control) are held back
    until content arrives, so a failure before then can still fail over."""

    __slots__ = (
        "call",
        "ex",
        "att",
        "rec",
        "breaker",
        "decoder",
        "parser",
        "chain",
        "enc",
        "held",
        "committed",
        "chunks",
        "eof",
        "failed",
        "limits",
        "on_frame",
        "on_events",
    )

    def __init__(self, call: Call, att: Attempt, resp: Any, limits: StreamLimits | None = None) -> None:
        self.call = call
        self.ex = call.ex
        self.att = att
        self.rec = call.rec
        self.breaker = call.rt.breaker if att.provider.circuit_breaker_enabled else None
        self.decoder = att.codec.StreamDecoder()
        self.parser = SSEParser()
        self.chain = StreamChain(att.response_rules, att.tctx)
        # Response rules may wrap the client's encoder (the stream-encoder hook).
        self.enc = wrap_stream_encoder(att.response_rules, call.new_encoder(att.channel.protocol), att.tctx)
        self.held: list[bytes] = []
        self.committed = False
        self.chunks = resp.content.iter_any().__aiter__()
        self.eof = False
        self.failed = False  # the upstream's bytes could not be parsed (an over-long SSE line)
        self.limits = limits if limits is not None else StreamLimits(call, att)
        # Per-event recorder hooks, fetched once (None: no recorder implements it).
        self.on_frame = hook_of(self.rec, "on_upstream_frame")
        self.on_events = hook_of(self.rec, "on_response_events")

    async def run(self) -> bool:
        ex = self.ex
        try:
            while True:
                chunk, error_event = await self._next_chunk()
                if error_event is not None:
                    await self._broken(error_event)
                    return False
                out, stop = self._process(self._decode(chunk))
                if self.committed and (out or not ex.data_sent):
                    await ex.write(b"".join(out))
                if stop or self.decoder.finished or chunk is None or self.failed:
                    break
            await self._finish()
            if not self.eof and not stop and not self.failed and self.decoder.finished:
                await self._drain()
            return self.eof
        finally:  # (here, not in a wrapper: one coroutine fewer alive per open stream)
            self.limits.close()

    async def _drain(self) -> None:
        """The stream's terminal event arrived, and the client has its answer, but the HTTP body
        may not be over: a chunked body's terminator (or a trailing ``[DONE]``) follows the last
        event, often in the next packet. Read it, within a short bound, so the connection goes
        back to the pool: closing it instead cost the next stream a TCP connect and aiohttp's
        connection set-up (measured: ~0.5 ms of the added time to first byte)."""
        left = DRAIN_BYTES
        try:
            async with asyncio.timeout(DRAIN_SECONDS):
                while left >= 0:
                    left -= len(await self.chunks.__anext__())
        except StopAsyncIteration:
            self.eof = True
        except (TimeoutError, *TRANSPORT_ERRORS):
            pass

    async def _next_chunk(self) -> tuple[bytes | None, ev.StreamError | None]:
        """The next upstream chunk (None at the end), or the error event for a broken upstream."""
        t = time.perf_counter()
        limits = self.limits
        try:
            if not limits.arm(self.committed):
                return await self.chunks.__anext__(), None
            try:
                return await self.chunks.__anext__(), None
            finally:
                limits.disarm()
        except StopAsyncIteration:
            self.eof = True
            return None, None
        except asyncio.CancelledError:
            if not limits.timed_out():
                raise
            return None, limits.expired(self.committed)
        except TimeoutError:  # the upstream client's own total deadline
            return None, limits.expired(self.committed)
        except TRANSPORT_ERRORS as exc:
            log.info(
                "upstream stream broke: channel=%s %s",
                self.att.channel.name,
                mask(repr(exc), self.att.secrets),
            )
            return None, ev.StreamError(
                message="upstream connection failed during the stream",
                code="upstream_stream_error",
                status=502,
            )
        finally:
            if not self.committed:
                self.ex.upstream_wait += time.perf_counter() - t

    async def _broken(self, error_event: ev.StreamError) -> None:
        """The upstream broke: fail over while nothing was sent, else end the client's stream
        with the error event."""
        if not self.committed:
            raise from_stream_error(error_event, self.att.secrets)
        if self.breaker is not None:
            self.breaker.record_failure(
                self.att.channel.id,
                threshold=self.att.provider.breaker_failures,
                window=self.att.provider.breaker_window,
                cooldown=self.att.provider.breaker_cooldown,
            )
        await self.ex.write(self.enc.encode(error_event) + self.enc.close())
        await self.ex.end_stream()

    def _decode(self, chunk: bytes | None) -> list[ev.Event]:
        frames = self.parser.close() if chunk is None else self.parser.feed(chunk)
        decoder = self.decoder
        on_frame = self.on_frame
        events: list[ev.Event] = []
        try:
            for name, payload in frames:
                if on_frame is not None:
                    on_frame(name, payload)
                events.extend(decoder.feed(name, payload))
                if decoder.finished:
                    break
        except SSELineTooLong as exc:
            self.eof = False  # the rest of the body is not read: drop the connection
            events.append(
                ev.StreamError(
                    message=f"upstream stream rejected: {exc}", code="upstream_stream_error", status=502
                )
            )
            self.failed = True
            return events
        if chunk is None and not decoder.finished:
            events.extend(decoder.close())
        for e in events:
            if e.__class__ is not ev.ProviderControl:  # keep-alives (pings) do not count
                limits = self.limits
                limits.last_event = limits.loop.time()
                break
        return events

    def _process(self, events: list[ev.Event]) -> tuple[list[bytes], bool]:
        """Events through the response rules and the encoder: (bytes to send now, stop)."""
        out: list[bytes] = []
        stop = False
        enc = self.enc
        for event in events:
            if isinstance(event, ev.StreamError):
                # Upstream text: never relayed (or captured, or logged) with the channel's secrets.
                if not self.committed:
                    raise from_stream_error(event, self.att.secrets)
                event = masked_stream_error(event, self.att.secrets)
            if event.__class__ is not ev.NodeDelta:  # (a delta has nothing to note)
                self._observe(event)
            try:
                processed = self.chain.process(event) if self.chain.rules else [event]
            except (TransformFailed, TransformRejected) as exc:
                if not self.committed:
                    raise
                err = to_client_error(exc)
                processed = [ev.StreamError(message=err.message, code=err.code, status=err.status)]
                stop = True
            if self.on_events is not None:
                self.on_events(processed)
            for item in processed:
                data = enc.encode(item)
                if data:
                    out.append(data)
            if not self.committed and not isinstance(event, ev.ResponseStart | ev.ProviderControl):
                self.committed = True
                self.ex.encoder = enc
                out[:0] = self.held
                self.held = []
            elif not self.committed:
                self.held.extend(out)
                out = []
            if stop:
                break
        return out, stop

    def _observe(self, event: ev.Event) -> None:
        """Breaker, usage and sticky-routing bookkeeping for one upstream event."""
        if isinstance(event, ev.ResponseStart):
            self.att.response_id = event.id
        elif isinstance(event, ev.ResponseDone):
            self.att.completed = True
            if self.breaker is not None:
                self.breaker.record_success(self.att.channel.id)
            self.rec.on_usage(event.usage)
        elif isinstance(event, ev.StreamError):
            self.att.completed = False
            if self.breaker is not None and (event.code or "").startswith("upstream_"):
                self.breaker.record_failure(
                    self.att.channel.id,
                    threshold=self.att.provider.breaker_failures,
                    window=self.att.provider.breaker_window,
                    cooldown=self.att.provider.breaker_cooldown,
                )

    async def _finish(self) -> None:
        ex = self.ex
        self.rec.on_stream_end(self.chain.executed())
        if not self.committed:
            # Terminal without content (an empty turn): still a legitimate answer.
            ex.encoder = self.enc
            await ex.write(b"".join(self.held))
        tail = self.enc.close()
        if tail:
            await ex.write(tail)
        await ex.end_stream()
