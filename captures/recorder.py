"""The capture recorder: fills a ``CaptureRecord`` (plain data, no ORM) from the pipeline's
``Recorder`` hooks and hands it to the sink after the response is finished.

Recording must cost the request path close to nothing (issue 20): the hooks keep references to
what the pipeline already holds (the client's body bytes, the bytes sent upstream, the upstream's
parsed body, the URP request and response objects, the bytes sent to the client, the executed
chain's ``ExecutedRule`` tuples). Nothing is parsed, copied into dicts, diffed or compressed here;
``captures.materialize`` does that on the writer. The one copy left is the per-rule state: a rule
mutates the URP object in place, so each state is snapshotted as JSON bytes (orjson, in C).

``capture_recorder`` is the factory the project wires into the proxy (``gateway.wiring``): it
answers None, so the request gets the do-nothing recorder, unless capture is on globally and
for the request's key."""

from __future__ import annotations

import logging
import time
from typing import Any

from captures import sink
from captures.record import AttemptRecord, CaptureRecord
from gateway.proxy.diagnose import describe_failure
from gateway.proxy.recorder import Recorder
from gateway.urp.events import StreamError
from gateway.urp.serialize import to_json_bytes

log = logging.getLogger("gateway.proxy.capture")


def capture_recorder(ex: Any, snapshot: Any, key: Any, raw_body: bytes) -> CaptureRecorder | None:
    """A recorder when the global switch and the key's mode want this request captured, and
    the writer has room for it (a key capturing only abnormal requests is still recorded: whether
    it will be submitted is known only at the end)."""
    if not (snapshot.settings.capture_enabled and key.capture_mode in ("all", "abnormal")):
        return None
    if key.capture_mode == "all" and sink.writer.full():
        sink.writer.shed(ex.request_id)  # overload: the writer is behind; shed before recording anything
        return None
    record = CaptureRecord(
        request_id=ex.request_id,
        created_at=time.time(),
        api_key_id=key.id,
        api_key_name=key.name,
        client_protocol=ex.protocol,
        stream=False,
        logical_model="",
        client_request=raw_body,
        client_request_id=getattr(ex, "client_request_id", None),
    )
    return CaptureRecorder(record, key.capture_mode, ex.t0)


class CaptureRecorder(Recorder):
    """One captured request. ``attempt`` is the record of the attempt in flight (attempts are
    sequential); ``events`` collects its streamed events after the response rules."""

    __slots__ = ("record", "mode", "t0", "attempt", "events", "steps")

    def __init__(self, record: CaptureRecord, mode: str, t0: float) -> None:
        self.record = record
        self.mode = mode
        self.t0 = t0  # the request's start (perf_counter), for the client time to first byte
        self.attempt: AttemptRecord | None = None
        self.events: list[Any] = []
        self.steps: dict[str, Any] = {}  # the chain runs traced for the attempt being built

    # -- per-rule states (chain.RuleTrace) -----------------------------------------------------
    def rule_trace(self) -> CaptureRecorder:
        return self

    def step(self, phase: str, rule: Any, target: Any) -> None:
        """Keep the URP before the chain and after every rule, as JSON bytes (whether a rule
        changed it is decided on the writer)."""
        try:
            state: Any = to_json_bytes(target)
        except Exception as exc:  # not encodable (an int beyond 64 bits): the capture will not build
            state = exc
        if rule is None:
            run: tuple[Any, list[Any]] = (state, [])
            if phase == "request":
                self.steps = {"request": run}
            elif self.attempt is not None:
                if self.attempt.rule_steps is None:
                    self.attempt.rule_steps = {}
                self.attempt.rule_steps["response"] = run
            return
        if phase == "request":
            current = self.steps.get("request")
        else:
            current = (self.attempt.rule_steps or {}).get("response") if self.attempt is not None else None
        if current is not None:
            current[1].append((rule.rule_id, rule.scope, rule.type_id, phase, state))

    # -- request ------------------------------------------------------------------------------
    def on_request_body(self, raw_body: bytes) -> None:
        record = self.record
        record.client_request = raw_body  # parsed on the writer (its own copy: rules mutate the URP)
        record.client_request_json = True
        record.model_from_body = True  # a request rejected before routing keeps its model

    def on_request_decoded(self, call: Any) -> None:
        self.record.stream = call.client_stream
        self.record.model_from_body = False
        self.record.logical_model = call.logical_model
        self.record.requested_model = call.req.model if isinstance(call.req.model, str) else ""

    # -- attempts -----------------------------------------------------------------------------
    def on_attempt_start(self, att: Any) -> None:
        self.attempt = AttemptRecord(
            provider=att.provider.name,
            channel=att.channel.name,
            upstream_protocol=att.channel.protocol,
            logical_model=self.record.logical_model,
            upstream_model=att.upstream_model,
            started_at=att.started_at,
            # References: an attempt's request is its own and is not touched once it is built.
            internal_request=att.request,
            upstream_request=att.body if getattr(att.codec, "wire", None) else att.raw,
            executed_chain=list(att.executed),
            rule_steps=self.steps or None,
            affinity=getattr(att, "affinity", None),
            # The attempt's own notes list: response-phase rules append to it later.
            notes=att.tctx.shared.setdefault("notes", []),
        )
        self.steps = {}
        self.events = []
        self.record.attempts.append(self.attempt)
        self.record.secrets.update(getattr(att, "secrets", ()))

    def on_upstream_response(self, status: int, started: float) -> None:
        if self.attempt is not None:
            self.attempt.upstream_status = status
            self.attempt.ttfb_ms = (time.perf_counter() - started) * 1000.0

    def on_upstream_body(self, body: Any) -> None:
        if self.attempt is not None:
            self.attempt.upstream_response = body  # bytes (an error or not JSON) are cut on the writer

    def on_upstream_frame(self, name: str | None, payload: str) -> None:
        if self.attempt is not None:
            self.attempt.upstream_frames.append(
                payload if name is None else f"event: {name}\ndata: {payload}"
            )

    def on_usage(self, usage: Any) -> None:
        self.record.usage_seen = usage is not None

    def on_response(self, resp: Any, executed: list[Any]) -> None:
        if self.attempt is not None:
            self.attempt.executed_chain.extend(executed)
            self.attempt.response_after_chains = resp  # encoded for the client already: not mutated
        self.record.usage_seen = resp.usage is not None

    def on_response_events(self, events: list[Any]) -> None:
        self.events.extend(events)
        for item in events:
            if isinstance(item, StreamError):
                # A stream that failed after its 200 is still an error for captures.
                self.record.error = self.record.error or f"{item.code or 'stream_error'}: {item.message}"

    def on_stream_end(self, executed: list[Any]) -> None:
        if self.attempt is not None:
            self.attempt.response_after_chains = self.events
            self.attempt.executed_chain.extend(executed)

    def on_attempt_done(self, att: Any, started: float) -> None:
        if self.attempt is not None:
            self.attempt.duration_ms = (time.perf_counter() - started) * 1000.0

    def on_attempt_failed(self, att: Any, failed: Any, started: float) -> None:
        arec = self.attempt
        if arec is not None:
            arec.error = failed.message
            try:
                arec.error_detail = describe_failure(
                    failed, att.url, att.total_timeout, att.connect_timeout, arec.upstream_response
                )
            except Exception:  # a description must never break the capture
                log.debug("could not describe a failed attempt", exc_info=True)
            arec.upstream_status = arec.upstream_status or failed.status
            arec.duration_ms = (time.perf_counter() - started) * 1000.0

    # -- client -------------------------------------------------------------------------------
    def on_client_response(self, status: int, body: bytes) -> None:
        record = self.record
        record.ttfb_ms = (time.perf_counter() - self.t0) * 1000.0
        record.client_response = body

    def on_client_frame(self, data: bytes) -> None:
        record = self.record
        if record.ttfb_ms is None:
            record.ttfb_ms = (time.perf_counter() - self.t0) * 1000.0
        record.client_frames.append(data.decode("utf-8", "replace"))

    def on_finish(self, ex: Any, error: str | None) -> None:
        """Submit unless the key only wants abnormal requests and this one was normal (one
        attempt, no failure, client got 2xx, usage present)."""
        cap = self.record
        status = ex.status
        cap.client_status = status
        cap.error = cap.error or error
        cap.duration_ms = (time.perf_counter() - ex.t0) * 1000.0
        if self.mode == "abnormal":
            abnormal = (
                len(cap.attempts) != 1
                or any(a.error for a in cap.attempts)
                or status >= 400
                or cap.error is not None
                or not cap.usage_seen
            )
            if not abnormal:
                return
        try:
            sink.submit(cap)
        except Exception:  # a capture must never affect the client
            log.warning("capture submit failed", exc_info=True)
