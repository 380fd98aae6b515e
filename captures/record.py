"""What the proxy records for one captured request. Plain data: built on the request path
without touching the ORM, handed to ``captures.sink.submit`` which persists it off the path.

On the request path the recorder only keeps references to what is already in hand (issue 20):
the client's body and the bytes sent to the client and upstream as ``bytes``, the URP request and
response objects (not mutated once their attempt is built / their answer encoded), the executed
chain as ``ExecutedRule`` tuples and the per-rule states as JSON bytes. The writer turns those into
the JSON-able form below with :func:`captures.materialize.materialize` before the dump is built;
a record built from JSON-able values (tests, replays) goes through unchanged.

``attempts``, ``client_frames`` and every kept attempt's ``upstream_frames`` are bounded lists
(``captures.bounds``) sharing one budget, so the proxy's plain ``append`` calls never grow a
capture past its limits."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from captures.bounds import BoundedAttempts, BoundedFrames, Budget, EventFrames


@dataclass(slots=True)
class AttemptRecord:
    provider: str
    channel: str
    upstream_protocol: str
    logical_model: str
    upstream_model: str
    started_at: float  # unix time
    internal_request: Any = None  # the URP request after the request chains (JSON-able once materialized)
    upstream_request: Any = None  # the exact upstream body (dict; the bytes sent on the request path)
    upstream_status: int | None = None
    upstream_response: Any = None  # body (dict/str) for non-stream
    upstream_frames: list[str] = field(default_factory=list)  # raw SSE frames for stream
    response_after_chains: Any = None  # URP response (non-stream) or list of events, JSON-able
    executed_chain: list[Any] = field(
        default_factory=list
    )  # {scope, transform, phase, rule_id} (or ExecutedRule)
    error: str | None = None
    ttfb_ms: float | None = None
    duration_ms: float | None = None
    # Per-rule URP states: {"request"|"response": {"before": state, "steps": [{"rule_id", "scope",
    # "transform", "phase", "changed", "after"}]}}; "after" is kept only when the rule changed
    # something (else it equals the previous state). Whole responses only; streams are compared
    # as assembled responses in the viewer. On the request path a phase holds the compact form
    # ``(before_json_bytes, [(rule_id, scope, transform, phase, after_json_bytes), ...])``.
    rule_steps: Any = None  # the dict above; ``Encoded`` JSON bytes once materialized for the writer
    error_detail: str | None = None  # the error class and target ("connect refused 127.0.0.1:9100")
    notes: list[str] = field(default_factory=list)  # what rules noted (images left untouched, fetches kept)
    affinity: dict[str, Any] | None = None  # {"hit": affinity chose this channel, "key": short hash}


@dataclass(slots=True)
class CaptureRecord:
    request_id: str
    created_at: float  # unix time
    api_key_id: int | None
    api_key_name: str
    client_protocol: str
    stream: bool
    logical_model: str
    client_request: Any = (
        None  # body as received (dict, or raw text if it was not JSON; bytes until materialized)
    )
    requested_model: str = ""  # the model the client named, before key redirects and effort suffixes
    attempts: list[AttemptRecord] = field(default_factory=list)
    client_status: int | None = None
    client_response: Any = None  # body sent to the client (non-stream)
    client_frames: list[str] = field(default_factory=list)  # SSE frames sent to the client
    usage_seen: bool = False
    error: str | None = None
    duration_ms: float | None = None
    ttfb_ms: float | None = None  # first byte sent to the client, from the request's start
    budget: Budget | None = None  # shared frame/attempt counters (set in __post_init__)
    client_request_id: str | None = None  # the client's x-request-id, as data (identity: request_id)
    # The secrets of every channel an attempt went to: removed verbatim from the stored dump, so
    # an upstream that echoes its key, URL or host does not hand them to the key's owner.
    secrets: set[str] = field(default_factory=set)
    client_request_json: bool = False  # client_request (bytes) parsed as a JSON object on the path
    model_from_body: bool = False  # logical_model is the body's "model" (rejected before routing)

    def __post_init__(self) -> None:
        if self.budget is None:
            self.budget = Budget()
        attempts = BoundedAttempts(self.budget)
        for attempt in self.attempts:
            attempts.append(attempt)
        self.attempts = attempts
        if not isinstance(self.client_frames, BoundedFrames):
            self.client_frames = EventFrames(self.budget, self.client_frames)
