"""The playground's engine: what the pipeline would do with one request, without calling upstream.

Given a snapshot, an optional key, a client protocol and a body, :func:`dry_run` walks the same
code the proxy runs (``decode_call``'s checks, ``routing``, ``attempt.build_attempt`` with a
:class:`StepTrace` on the request chain) and reports the routing decision, why each configured
rule runs or not, every executed request rule with the URP before and after it, and the encoded
upstream request (secrets masked). :func:`send` optionally makes the real upstream call for a
planned attempt and reports the response side the same way (response rules step by step and
the client's answer).

Core module: no ORM, no apps. The project layer (``gateway.playground``) supplies the snapshot
(with unsaved rule edits compiled in) and the list of every configured rule, enabled or not,
so the match explanation can name disabled rules the snapshot never holds; it also turns the
before/after states into JSON diffs.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import orjson

from gateway.errors import AttemptFailed, ClientError, ProtocolError, TransformFailed, TransformRejected
from gateway.protocols import codec
from gateway.protocols.base import EncodeContext
from gateway.urp import Request, Response
from gateway.urp.serialize import to_jsonable
from gateway.urp.synth import response_to_events

from .attempt import Attempt, build_attempt
from .chain import CompiledRule, run_response
from .diagnose import describe_exception
from .errors import status_failure, to_client_error
from .globs import any_glob
from .recorder import Recorder
from .routing import model_allowed, resolve_logical_model
from .snapshot import ChannelSnap, KeySnap, ProviderSnap, Snapshot
from .upstream import TRANSPORT_ERRORS, UpstreamClient

SECRET_HEADERS = frozenset({"authorization", "x-api-key", "x-goog-api-key", "api-key"})
NO_KEY = KeySnap(
    id=0,
    name="(no key)",
    enabled=True,
    expires_at=None,
    allowed_models=None,
    redirects=(),
    capture_mode="off",
    chain=(),
)
EXCERPT = 2000


@dataclass(slots=True, frozen=True)
class RuleInfo:
    """One configured rule as the match explanation needs it (enabled or not). ``owner`` is the
    provider id for provider rules, the key id for key rules; ``problem`` says why it cannot
    run at all (unknown transform, not allowed in its scope)."""

    rule_id: int | None
    scope: str
    owner: int | None
    owner_name: str
    transform: str
    phase: str
    models: tuple[str, ...] | None
    enabled: bool
    position: int = 0
    problem: str | None = None
    edited: bool = False  # an unsaved edit from the playground

    def as_dict(self) -> dict[str, Any]:
        return {
            "rule_id": self.rule_id,
            "scope": self.scope,
            "owner": self.owner,
            "owner_name": self.owner_name,
            "transform": self.transform,
            "phase": self.phase,
            "models": list(self.models) if self.models is not None else None,
            "enabled": self.enabled,
            "position": self.position,
            "edited": self.edited,
        }


@dataclass(slots=True)
class Step:
    """One rule of a chain run: the JSON state before and after it."""

    rule: CompiledRule
    before: Any
    after: Any

    @property
    def changed(self) -> bool:
        return self.before != self.after


class StepTrace:
    """A ``chain.RuleTrace`` keeping the JSON state before and after every rule, by phase."""

    __slots__ = ("states", "steps")

    def __init__(self) -> None:
        self.states: dict[str, Any] = {}
        self.steps: dict[str, list[Step]] = {"request": [], "response": []}

    def step(self, phase: str, rule: CompiledRule | None, target: Request | Response) -> None:
        state = to_jsonable(target)
        if rule is not None:
            self.steps[phase].append(Step(rule, self.states.get(phase), state))
        else:
            self.states[f"{phase}_before"] = state
        self.states[phase] = state


@dataclass(slots=True)
class Plan:
    """A dry run's result: ``report`` is JSON-able; ``attempt`` is kept for :func:`send`."""

    report: dict[str, Any]
    attempt: Attempt | None = None
    trace: StepTrace = field(default_factory=StepTrace)
    logical_model: str = ""
    protocol: str = ""
    client_stream: bool = False


def _error(stage: str, err: ClientError) -> dict[str, Any]:
    return {
        "stage": stage,
        "status": err.status,
        "code": err.code,
        "message": err.message,
        "param": err.param,
    }


def explain_rule(
    info: RuleInfo, *, logical_model: str, provider: ProviderSnap | None, key: KeySnap | None
) -> tuple[str, str]:
    """(status, reason): ``runs`` (request phase), ``response`` (runs on the answer) or
    ``skipped`` with why: disabled, broken, another provider's or key's chain, glob."""
    if not info.enabled:
        return "skipped", "disabled"
    if info.problem:
        return "skipped", info.problem
    if info.scope == "provider" and (provider is None or info.owner != provider.id):
        where = provider.name if provider is not None else "no provider"
        return "skipped", f"scope: belongs to provider {info.owner_name!r}; the request goes to {where}"
    if info.scope == "api_key" and (key is None or info.owner != key.id):
        return "skipped", (
            f"scope: belongs to API key {info.owner_name!r}; "
            + ("no key chosen" if key is None else f"the request uses key {key.name!r}")
        )
    if not any_glob(info.models, logical_model):
        return "skipped", f"glob: {list(info.models or ())} does not match model {logical_model!r}"
    if info.phase == "response":
        return "response", "response phase: runs on the upstream's answer"
    return "runs", "matches: request phase, scope and model"


def _channel_rows(snapshot: Snapshot, logical: str, breaker_open: Any) -> list[dict[str, Any]]:
    rows = []
    for route in snapshot.routes.get(logical, ()):
        rows.append(
            {
                "provider": route.provider.name,
                "provider_id": route.provider.id,
                "priority": route.provider.priority,
                "channels": [
                    {
                        "channel": ch.name,
                        "channel_id": ch.id,
                        "protocol": ch.protocol,
                        "weight": ch.weight,
                        "upstream_model": um,
                        "breaker_open": bool(breaker_open(ch.id)),
                    }
                    for ch, um in route.channels
                ],
            }
        )
    return rows


def choose(
    snapshot: Snapshot, logical: str, channel_id: int | None = None, breaker_open: Any = None
) -> tuple[ProviderSnap, ChannelSnap, str] | None:
    """The deterministic pick the playground shows: the first provider by priority and its
    heaviest channel whose circuit is closed (the proxy draws channels at random by weight, so
    the report lists every candidate too), or the named channel."""
    is_open = breaker_open or (lambda _id: False)
    routes = snapshot.routes.get(logical, ())
    if channel_id is not None:
        for route in routes:
            for ch, um in route.channels:
                if ch.id == channel_id:
                    return route.provider, ch, um
        return None
    for route in routes:
        healthy = [(ch, um) for ch, um in route.channels if not is_open(ch.id)] or list(route.channels)
        if healthy:
            ch, um = max(healthy, key=lambda pair: pair[0].weight)
            return route.provider, ch, um
    return None


def masked_headers(headers: dict[str, str]) -> dict[str, str]:
    return {k: ("***" if k.lower() in SECRET_HEADERS else v) for k, v in headers.items()}


def _step_rows(steps: list[Step], start: int = 1) -> list[dict[str, Any]]:
    return [
        {
            "ordinal": n,
            "rule_id": s.rule.rule_id,
            "scope": s.rule.scope,
            "phase": s.rule.phase,
            "transform": s.rule.type_id,
            "changed": s.changed,
            "before": s.before,
            "after": s.after,
        }
        for n, s in enumerate(steps, start=start)
    ]


def _decode(plan: Plan, protocol: str, body: Any, stream: bool | None) -> Request | None:
    """The client's body decoded (``stream`` overriding its own flag), or None with the error
    in the report."""
    rep = plan.report
    if not isinstance(body, dict):
        rep["error"] = _error(
            "decode", ClientError(400, "invalid_request", "request body must be a JSON object")
        )
        return None
    if stream is not None:
        body = {**body, "stream": bool(stream)} if protocol != "gemini" else body
    try:
        req = codec(protocol).decode_request(body)
    except ProtocolError as exc:
        rep["error"] = _error("decode", ClientError(400, "invalid_request", exc.message, param=exc.param))
        return None
    except KeyError:
        rep["error"] = _error("decode", ClientError(400, "invalid_request", f"unknown protocol {protocol!r}"))
        return None
    if stream is not None:
        req.stream = bool(stream)
    if not isinstance(req.model, str) or not req.model:
        rep["error"] = _error(
            "decode", ClientError(400, "invalid_request", "model is required", param="model")
        )
        return None
    return req


def _new_plan(protocol: str, key: KeySnap | None) -> Plan:
    """An empty plan whose report has every section, so a plan that stops early still has them."""
    return Plan(
        report={
            "protocol": protocol,
            "key": key.name if key else None,
            "error": None,
            "routing": None,
            "rules": [],
            "request_chain": [],
            "response_rules": [],
            "upstream": None,
        },
        protocol=protocol,
    )


def _choose(
    plan: Plan,
    snapshot: Snapshot,
    the_key: KeySnap,
    logical: str,
    channel_id: int | None,
    breaker_open: Any,
) -> tuple[ProviderSnap, ChannelSnap, str] | None:
    """The key's policy, then routing: the (provider, channel, upstream model) chosen, or None
    with the report's error set; the candidate channels are listed either way once allowed."""
    rep = plan.report
    chosen: tuple[ProviderSnap, ChannelSnap, str] | None = None
    if not model_allowed(the_key, logical):
        rep["error"] = _error(
            "policy",
            ClientError(403, "model_not_allowed", f"model {logical!r} is not allowed for this API key"),
        )
    else:
        rep["routing"] = {"candidates": _channel_rows(snapshot, logical, breaker_open or (lambda _id: False))}
        chosen = choose(snapshot, logical, channel_id, breaker_open)
        if chosen is None:
            rep["error"] = _error(
                "routing", ClientError(404, "model_not_found", f"Model not found: {logical}")
            )
    return chosen


def _report_route(
    rep: dict[str, Any], provider: ProviderSnap, channel: ChannelSnap, upstream_model: str
) -> None:
    """Add the chosen provider and channel to the report's routing section."""
    rep["routing"].update(
        {
            "provider": provider.name,
            "provider_id": provider.id,
            "channel": channel.name,
            "channel_id": channel.id,
            "upstream_protocol": channel.protocol,
            "upstream_model": upstream_model,
        }
    )


def _report_attempt(plan: Plan, att: Attempt, channel: ChannelSnap) -> None:
    """Record the built attempt: the URP before and after the request chain, the response rules
    and the upstream request (URL and headers with secrets masked)."""
    rep = plan.report
    plan.attempt = att
    rep["request_chain"] = _step_rows(plan.trace.steps["request"])
    rep["urp_before"] = plan.trace.states.get("request_before")
    rep["urp_after"] = to_jsonable(att.request)
    rep["routing"]["upstream_model"] = att.upstream_model
    rep["response_rules"] = [
        {"rule_id": r.rule_id, "scope": r.scope, "phase": r.phase, "transform": r.type_id}
        for r in att.response_rules
    ]
    url = att.url.replace(channel.api_key, "***") if channel.api_key else att.url
    rep["upstream"] = {
        "url": url,
        "method": "POST",
        "headers": masked_headers(att.headers),
        "body": att.body,
        "stream": att.upstream_stream,
    }


def dry_run(
    snapshot: Snapshot,
    key: KeySnap | None,
    protocol: str,
    body: Any,
    *,
    stream: bool | None = None,
    rules: list[RuleInfo] | tuple[RuleInfo, ...] = (),
    channel_id: int | None = None,
    breaker_open: Any = None,
    anthropic_beta: str | None = None,
) -> Plan:
    """Plan one request without I/O. ``stream`` overrides the body's own flag when given."""
    plan = _new_plan(protocol, key)
    rep = plan.report
    the_key = key or NO_KEY
    req = _decode(plan, protocol, body, stream)
    if req is None:
        return plan
    logical = resolve_logical_model(the_key, req.model)
    plan.logical_model = logical
    plan.client_stream = bool(req.stream)
    rep.update(
        {
            "model": req.model,
            "logical_model": logical,
            "stream": bool(req.stream),
            "redirected": logical != req.model,
        }
    )
    chosen = _choose(plan, snapshot, the_key, logical, channel_id, breaker_open)
    provider = chosen[0] if chosen else None
    for info in rules:
        status, reason = explain_rule(info, logical_model=logical, provider=provider, key=key)
        rep["rules"].append({**info.as_dict(), "status": status, "reason": reason})
    if chosen is None:
        return plan
    provider, channel, upstream_model = chosen
    _report_route(rep, provider, channel, upstream_model)
    try:
        att = build_attempt(
            req,
            snapshot=snapshot,
            key=the_key,
            provider=provider,
            channel=channel,
            upstream_model=upstream_model,
            logical_model=logical,
            client_protocol=protocol,
            client_stream=plan.client_stream,
            anthropic_beta=anthropic_beta,
            trace=plan.trace,
        )
    except (TransformRejected, TransformFailed, ProtocolError) as exc:
        rep["error"] = _error("rules", to_client_error(exc))
        rep["request_chain"] = _step_rows(plan.trace.steps["request"])
        return plan
    _report_attempt(plan, att, channel)
    return plan


class _BodyRecorder(Recorder):
    """Keeps what ``whole.decode_whole`` reports about the upstream's answer."""

    __slots__ = ("body", "frames")

    def __init__(self) -> None:
        self.body: Any = None
        self.frames: list[str] = []

    def on_upstream_body(self, body: Any) -> None:
        self.body = body

    def on_upstream_frame(self, name: str | None, payload: str) -> None:
        self.frames.append(payload if name is None else f"event: {name}\ndata: {payload}")


def _report_response(plan: Plan, att: Attempt, response: Response, out: dict[str, Any]) -> None:
    """Run the response rules on the decoded answer and add what the client would get (the SSE
    text for a streaming client, else the JSON body) to the report."""
    try:
        run_response(att.response_rules, response, att.tctx, plan.trace)
    except (TransformRejected, TransformFailed) as exc:
        out["error"] = to_client_error(exc).message
    out["response_chain"] = _step_rows(plan.trace.steps["response"])
    out["urp_response_before"] = plan.trace.states.get("response_before")
    out["urp_response_after"] = to_jsonable(response)
    ccodec = codec(plan.protocol)
    ctx = EncodeContext(model=plan.logical_model, source_protocol=att.channel.protocol)
    if plan.client_stream:
        enc = ccodec.StreamEncoder(ctx)
        sse = b"".join(enc.encode(event) for event in response_to_events(response)) + enc.close()
        out["client_stream"] = sse.decode("utf-8", "replace")
    else:
        out["client_response"] = orjson.loads(orjson.dumps(ccodec.encode_response(response, ctx)))


async def send(plan: Plan, client: UpstreamClient | None = None) -> dict[str, Any]:
    """Make the planned attempt for real (one attempt, no failover) and report the response
    side: upstream status and body, every response rule with its before/after, the client's
    answer. The report never holds the channel key."""
    from .whole import decode_whole, read_bounded  # the whole path's readers, reused as is

    att = plan.attempt
    if att is None:
        return {"error": "nothing to send: the dry run did not reach an upstream request"}
    own = client is None
    client = client or UpstreamClient()
    rec = _BodyRecorder()
    out: dict[str, Any] = {
        "status": None,
        "latency_ms": None,
        "error": None,
        "upstream_body": None,
        "upstream_frames": [],
        "response_chain": [],
        "client_response": None,
    }
    t = time.perf_counter()
    try:
        async with client.post(
            att.url,
            att.raw,
            att.headers,
            total=att.total_timeout,
            connect=att.connect_timeout,
            sock_read=None,
        ) as resp:
            out["status"] = resp.status
            ctype = resp.content_type
            data = await read_bounded(resp, 64 * 1024 * 1024)
        out["latency_ms"] = round((time.perf_counter() - t) * 1000.0, 1)
        if out["status"] >= 300:
            failed = status_failure(out["status"], data, att.secrets)
            out["error"] = failed.message
            out["upstream_body"] = (
                data[:EXCERPT].decode("utf-8", "replace").replace(att.channel.api_key or "\0", "***")
            )
            return out
        response = decode_whole(att, data, ctype, rec)
    except TRANSPORT_ERRORS as exc:
        out["latency_ms"] = round((time.perf_counter() - t) * 1000.0, 1)
        out["error"] = describe_exception(exc, att.url, att.total_timeout, att.connect_timeout)
        return out
    except AttemptFailed as exc:
        out["error"] = exc.message
        out["upstream_body"] = (
            rec.body if not isinstance(rec.body, bytes) else rec.body[:EXCERPT].decode("utf-8", "replace")
        )
        return out
    finally:
        if own:
            await client.close()
    out["upstream_body"] = rec.body
    out["upstream_frames"] = rec.frames
    _report_response(plan, att, response, out)
    return out
