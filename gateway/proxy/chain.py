"""The chain engine: runs rules of the provider, global and API-key chains in that order.

Part of the core (no ORM, no apps): ``transforms.engine`` re-exports it for plug-in authors and
the admin. Rules arrive compiled (transform instance built, globs kept) from the configuration snapshot,
so running a chain costs no parsing and no database access.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from gateway.errors import TransformFailed, TransformRejected
from gateway.urp import Request, Response
from gateway.urp.events import Event

from .globs import any_glob


class RuleTransform(Protocol):
    """What the engine calls on a rule's transform (``transforms.base.Transform`` satisfies it)."""

    type_id: str

    def apply_request(self, req: Request, ctx: TransformContext) -> None: ...
    def apply_response(self, resp: Response, ctx: TransformContext) -> None: ...
    def needs_whole_response(self, ctx: TransformContext) -> bool: ...
    def new_stream_state(self, ctx: TransformContext) -> Any: ...
    def apply_event(self, event: Event, state: Any, ctx: TransformContext) -> list[Event]: ...
    def wrap_stream_encoder(self, encoder: Any, ctx: TransformContext) -> Any: ...

    # Optional async variants (None when absent): awaited in place of the sync method by
    # run_request_async / run_response_async, for rules doing I/O or heavy CPU work.
    apply_request_async: Any
    apply_response_async: Any


@dataclass(slots=True)
class TransformContext:
    """Per-attempt facts a transform may read. ``shared`` is per-attempt scratch space that a
    request rule can use to tell the paired response rule what it did (keyed by type id); it is
    never serialised and no client input reaches it (the cache rules keep marker ownership there).
    ``api_key_id`` and ``username`` identify the calling key and its owner."""

    logical_model: str
    client_protocol: str
    upstream_protocol: str | None = None
    upstream_model: str | None = None
    provider: str | None = None
    api_key_id: int | None = None
    username: str | None = None  # the key owner's username: identity for cache keys, never on the wire
    stream: bool = False
    shared: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True, frozen=True)
class ExecutedRule:
    """One entry of the executed chain recorded for captures (never the rule's config)."""

    scope: str
    transform: str
    phase: str
    rule_id: int | None

    def as_dict(self) -> dict[str, Any]:
        return {
            "scope": self.scope,
            "transform": self.transform,
            "phase": self.phase,
            "rule_id": self.rule_id,
        }


@dataclass(slots=True, frozen=True)
class CompiledRule:
    rule_id: int | None
    scope: str
    phase: str
    models: tuple[str, ...] | None
    transform: RuleTransform
    # What a run of this rule in its own phase records: made once per rule, not once per request
    # (a frozen dataclass's __init__ sets each field through object.__setattr__).
    executed: ExecutedRule = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "executed", ExecutedRule(self.scope, self.type_id, self.phase, self.rule_id))

    def executed_in(self, phase: str) -> ExecutedRule:
        return (
            self.executed
            if phase == self.phase
            else ExecutedRule(self.scope, self.type_id, phase, self.rule_id)
        )

    @property
    def type_id(self) -> str:
        return self.transform.type_id

    def matches(self, phase: str, logical_model: str) -> bool:
        return self.phase == phase and any_glob(self.models, logical_model)


# select's answers by (the chains' ids, phase, model); each entry holds its chains, so no id
# in a key can be reused by another object while the entry lives.
_selected: dict[tuple[Any, ...], tuple[Any, list[CompiledRule]]] = {}
_SELECTED_MAX = 512


def select(chains: list[tuple[CompiledRule, ...]], phase: str, logical_model: str) -> list[CompiledRule]:
    """The rules that run for this phase and model, in execution order. ``chains`` is
    [provider chain, global chain, API-key chain]; disabled rules never reach the snapshot.

    A snapshot's chains are immutable tuples, so the answer is kept per chains, phase and model
    (shared: callers never mutate it): matching every rule's globs twice per attempt was a tenth
    of what the bench's five-rule chain cost a request."""
    key = (*map(id, chains), phase, logical_model)
    kept = _selected.get(key)
    if kept is not None:
        return kept[1]
    rules = [rule for chain in chains for rule in chain if rule.matches(phase, logical_model)]
    if all(type(chain) is tuple for chain in chains):  # a list (a test's, the playground's) may change
        if len(_selected) >= _SELECTED_MAX:
            _selected.clear()
        _selected[key] = (tuple(chains), rules)
    return rules


def _guard(rule: CompiledRule, fn, *args):
    try:
        return fn(*args)
    except (TransformRejected, TransformFailed):
        raise
    except Exception as exc:  # a built-in's bug must not become a 500 with a stack trace
        raise TransformFailed(f"transform {rule.type_id} failed: {type(exc).__name__}") from exc


class RuleTrace(Protocol):
    """Watches a chain rule by rule (captures, the playground). ``step`` is called once with
    ``rule=None`` before the first rule and once after each rule, with the object the rules
    mutate; a tracer that wants per-rule diffs snapshots it there. The engine only calls it
    when one was passed, so a request nobody traces pays one ``is None`` test per rule."""

    def step(self, phase: str, rule: CompiledRule | None, target: Request | Response) -> None: ...


def run_request(
    rules: list[CompiledRule], req: Request, ctx: TransformContext, trace: RuleTrace | None = None
) -> list[ExecutedRule]:
    executed = []
    if trace is not None:
        trace.step("request", None, req)
    for rule in rules:
        _guard(rule, rule.transform.apply_request, req, ctx)
        executed.append(rule.executed_in("request"))
        if trace is not None:
            trace.step("request", rule, req)
    return executed


async def _aguard(rule: CompiledRule, fn: Callable[..., Awaitable[Any]], *args: Any) -> Any:
    try:
        return await fn(*args)
    except (TransformRejected, TransformFailed):
        raise
    except Exception as exc:
        raise TransformFailed(f"transform {rule.type_id} failed: {type(exc).__name__}") from exc


async def _run_async(
    phase: str, rules: list[CompiledRule], target: Any, ctx: TransformContext, trace: RuleTrace | None
) -> list[ExecutedRule]:
    """Run a chain for ``phase``, awaiting a rule's async hook (``apply_<phase>_async``) where it
    has one, else calling its sync ``apply_<phase>``, each at its own position in the chain."""
    executed: list[ExecutedRule] = []
    if not rules and trace is None:  # the empty chain: no list of names, no loop
        return executed
    if trace is not None:
        trace.step(phase, None, target)
    sync_name = f"apply_{phase}"
    async_name = sync_name + "_async"
    for rule in rules:
        hook = getattr(rule.transform, async_name, None)
        if hook is None:
            _guard(rule, getattr(rule.transform, sync_name), target, ctx)
        else:
            await _aguard(rule, hook, target, ctx)
        executed.append(rule.executed_in(phase))
        if trace is not None:
            trace.step(phase, rule, target)
    return executed


async def run_request_async(
    rules: list[CompiledRule], req: Request, ctx: TransformContext, trace: RuleTrace | None = None
) -> list[ExecutedRule]:
    """``run_request`` for the proxy: a rule with ``apply_request_async`` is awaited at its own
    position in the chain (so a fetch or an image re-encode never blocks the event loop)."""
    return await _run_async("request", rules, req, ctx, trace)


async def run_response_async(
    rules: list[CompiledRule], resp: Response, ctx: TransformContext, trace: RuleTrace | None = None
) -> list[ExecutedRule]:
    """``run_response`` awaiting ``apply_response_async`` hooks in chain order."""
    return await _run_async("response", rules, resp, ctx, trace)


def run_response(
    rules: list[CompiledRule], resp: Response, ctx: TransformContext, trace: RuleTrace | None = None
) -> list[ExecutedRule]:
    executed = []
    if trace is not None:
        trace.step("response", None, resp)
    for rule in rules:
        _guard(rule, rule.transform.apply_response, resp, ctx)
        executed.append(rule.executed_in("response"))
        if trace is not None:
            trace.step("response", rule, resp)
    return executed


def needs_whole_response(rules: list[CompiledRule], ctx: TransformContext) -> bool:
    return any(rule.transform.needs_whole_response(ctx) for rule in rules)


def wrap_stream_encoder(rules: list[CompiledRule], encoder: Any, ctx: TransformContext) -> Any:
    """The client's stream encoder, wrapped by the response rules whose transform wraps it
    (``Transform.wrap_stream_encoder``; the default returns the encoder itself). One wrapper per
    transform type, from the first such rule in execution order (provider, global, API key; first
    match wins, as the reference does for ``max_frame_length``). ``rules`` are the attempt's
    selected response rules. This is how a transform reaches the bytes on the wire without the
    codecs or the proxy naming it."""
    wrapped: set[str] | None = None
    for rule in rules:
        if wrapped is not None and rule.type_id in wrapped:
            continue
        new = _guard(rule, rule.transform.wrap_stream_encoder, encoder, ctx)
        if new is not encoder:
            wrapped = wrapped if wrapped is not None else set()
            wrapped.add(rule.type_id)
            encoder = new
    return encoder


class StreamChain:
    """Runs response rules event by event with per-rule state that lives for one stream."""

    __slots__ = ("rules", "ctx", "states")

    def __init__(self, rules: list[CompiledRule], ctx: TransformContext) -> None:
        self.rules = rules
        self.ctx = ctx
        self.states = [_guard(rule, rule.transform.new_stream_state, ctx) for rule in rules]

    def executed(self) -> list[ExecutedRule]:
        return [r.executed_in("response") for r in self.rules]

    def process(self, event: Event) -> list[Event]:
        events = [event]
        if not self.rules:  # no response rules (the common case): the event as is
            return events
        for rule, state in zip(self.rules, self.states, strict=True):
            out: list[Event] = []
            for ev in events:
                out.extend(_guard(rule, rule.transform.apply_event, ev, state, self.ctx))
            events = out
            if not events:
                break
        return events
