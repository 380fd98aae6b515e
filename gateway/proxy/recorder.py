"""What the pipeline tells observers about one request: the ``Recorder`` hooks.

The pipeline calls every hook unconditionally on ``call.rec`` (and ``Exchange.recorder``), so it
reads the same whether anyone records or not. With nothing recording, the recorder is the
shared :data:`NULL_RECORDER` whose hooks return at once (one attribute lookup and call each, no
allocation). Captures implement it today (``captures.recorder``); request logs, metrics, the
playground and replay hang off the same hooks.

A request's recorders come from a :class:`RecorderSet` the project layer builds at start-up
(``gateway.wiring``): each factory looks at the request (snapshot, key) and returns a recorder
or ``None``. No factory answering gives ``NULL_RECORDER``, one gives itself, several a
:class:`FanOutRecorder`.

Hooks in the order a request walks them (``started`` is a ``time.perf_counter()`` value; a
recorder that wants a duration computes it when the hook runs):

- ``on_request_body(raw_body)``: the client's body parsed as a JSON object (not yet decoded)
- ``on_request_decoded(call)``: decoded, logical model resolved and allowed (``call.logical_model``,
  ``call.client_stream``)
- ``on_attempt_start(att)``: an attempt is built (request rules ran, upstream body encoded)
- ``on_upstream_response(status, started)``: the upstream's status line arrived
- ``on_upstream_body(body)``: the upstream's whole body: a decoded JSON object, or ``bytes`` when
  it was an error status or not JSON
- ``on_upstream_frame(name, payload)``: one upstream SSE frame
- ``on_usage(usage)``: the response's usage is known (``None``: the upstream sent none)
- ``on_response(resp, executed)``: a whole response after the response rules, and those rules
- ``on_response_events(events)``: stream events after the response rules, batch by batch
- ``on_stream_end(executed)``: the stream was relayed to its end; the response rules that ran
- ``on_attempt_done(att, started)`` / ``on_attempt_failed(att, failed, started)``
- ``on_client_response(status, body)``: a whole answer (success or error) is sent to the client
- ``on_client_frame(data)``: SSE bytes are sent to the client
- ``on_finish(ex, error)``: the response is finished (``ex.status``; ``error`` is
  ``"code: message"`` when the pipeline answered with an error)

Hooks must not raise into the pipeline and must not block: anything slow goes to a queue.

Besides the hooks, ``rule_trace()`` lets a recorder watch the request and whole-response chains
rule by rule (a ``chain.RuleTrace``); the default answers None and the engine then does no
per-rule work at all.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gateway.errors import AttemptFailed
    from gateway.urp import Response, Usage
    from gateway.urp.events import Event

    from .attempt import Attempt
    from .call import Call
    from .chain import ExecutedRule, RuleTrace
    from .exchange import Exchange
    from .snapshot import KeySnap, Snapshot

HOOKS = (
    "on_request_body",
    "on_request_decoded",
    "on_attempt_start",
    "on_upstream_response",
    "on_upstream_body",
    "on_upstream_frame",
    "on_usage",
    "on_response",
    "on_response_events",
    "on_stream_end",
    "on_attempt_done",
    "on_attempt_failed",
    "on_client_response",
    "on_client_frame",
    "on_finish",
)


class Recorder:
    """Base class: every hook does nothing, so a recorder overrides only what it needs."""

    __slots__ = ()

    def on_request_body(self, raw_body: bytes) -> None: ...
    def on_request_decoded(self, call: Call) -> None: ...
    def on_attempt_start(self, att: Attempt) -> None: ...
    def on_upstream_response(self, status: int, started: float) -> None: ...
    def on_upstream_body(self, body: Any) -> None: ...
    def on_upstream_frame(self, name: str | None, payload: str) -> None: ...
    def on_usage(self, usage: Usage | None) -> None: ...
    def on_response(self, resp: Response, executed: list[ExecutedRule]) -> None: ...
    def on_response_events(self, events: list[Event]) -> None: ...
    def on_stream_end(self, executed: list[ExecutedRule]) -> None: ...
    def on_attempt_done(self, att: Attempt, started: float) -> None: ...
    def on_attempt_failed(self, att: Attempt, failed: AttemptFailed, started: float) -> None: ...
    def on_client_response(self, status: int, body: bytes) -> None: ...
    def on_client_frame(self, data: bytes) -> None: ...
    def on_finish(self, ex: Exchange, error: str | None) -> None: ...

    def rule_trace(self) -> RuleTrace | None:
        """A tracer for the next chain run (per-rule snapshots), or None: nothing to trace."""
        return None

    def hook_of(self, name: str) -> Callable[..., None] | None:
        """The bound hook ``name``, or None when this recorder leaves it as the base class's
        no-op: a per-event caller (the stream loop) fetches it once and skips the call."""
        if not _implements(type(self), name):
            return None
        hook: Callable[..., None] = getattr(self, name)
        return hook


def _implements(cls: type, name: str) -> bool:
    """Whether ``cls`` overrides hook ``name`` (anything that is not a Recorder, a test double,
    is taken to implement every hook)."""
    return not issubclass(cls, Recorder) or getattr(cls, name) is not getattr(Recorder, name)


def hook_of(rec: Any, name: str) -> Callable[..., None] | None:
    """``rec.hook_of(name)``; a recorder that is not a :class:`Recorder` (a test double) gives
    its attribute as is."""
    if isinstance(rec, Recorder):
        return rec.hook_of(name)
    hook: Callable[..., None] = getattr(rec, name)
    return hook


class NullRecorder(Recorder):
    """Records nothing: what every request gets when no recorder wants it."""

    __slots__ = ()


NULL_RECORDER = NullRecorder()


def _fan(name: str) -> Callable[..., None]:
    def hook(self: FanOutRecorder, *args: Any) -> None:
        recorders = self.recorders
        for i, fn in self.plan[name]:
            if fn is None:
                getattr(recorders[i], name)(*args)
            else:
                fn(recorders[i], *args)

    hook.__name__ = name
    return hook


# Per hook, which of a fan-out's recorders implement it: ((index, the class's function), ...),
# the function None for an object that is not a Recorder (a test double: looked up on it).
FanPlan = dict[str, tuple[tuple[int, Callable[..., None] | None], ...]]
_plans: dict[tuple[type, ...], FanPlan] = {}


def _plan(classes: tuple[type, ...]) -> FanPlan:
    """Built once per combination of recorder classes: a fan-out is made per request, and going
    through every recorder for every hook cost a no-op call and a ``getattr`` each (the request
    log and the metrics recorders implement different hooks)."""
    plan = _plans.get(classes)
    if plan is None:
        plan = {}
        for name in HOOKS:
            plan[name] = tuple(
                (i, getattr(cls, name) if issubclass(cls, Recorder) else None)
                for i, cls in enumerate(classes)
                if _implements(cls, name)
            )
        _plans[classes] = plan
    return plan


class FanOutRecorder(Recorder):
    """Several recorders for one request: each hook goes to each of them that implements it,
    in order."""

    __slots__ = ("recorders", "plan")

    def __init__(self, recorders: Iterable[Recorder]) -> None:
        self.recorders = tuple(recorders)
        self.plan = _plan(tuple(map(type, self.recorders)))

    def rule_trace(self) -> RuleTrace | None:
        """The first recorder's tracer that wants one (one tracer per chain run is enough)."""
        for recorder in self.recorders:
            trace = recorder.rule_trace()
            if trace is not None:
                return trace
        return None

    def hook_of(self, name: str) -> Callable[..., None] | None:
        """Only the recorders that implement ``name``: none, one (its own bound hook, no fan-out
        loop), or several (called in order)."""
        entries = self.plan[name]
        if not entries:
            return None
        recorders = self.recorders
        hooks = [getattr(recorders[i], name) for i, _ in entries]
        if len(hooks) == 1:
            return hooks[0]
        several = tuple(hooks)

        def fan(*args: Any) -> None:
            for hook in several:
                hook(*args)

        return fan


for _name in HOOKS:
    setattr(FanOutRecorder, _name, _fan(_name))


RecorderFactory = Callable[["Exchange", "Snapshot", "KeySnap", bytes], Recorder | None]
# For an answer no pipeline recorder followed: the exchange and its key (None: no valid key).
UnrecordedFactory = Callable[["Exchange", "KeySnap | None"], Recorder | None]


class RecorderSet:
    """The recorder factories the project wired in; ``start`` picks one request's recorder.

    ``unrecorded`` covers every other ``/v1`` answer: requests refused before a pipeline
    recorder exists (no or a bad key, an IP allow-list refusal, a body over the limit, an
    unknown path or method), the models list and the non-generation endpoints. The proxy calls
    :meth:`finish_unrecorded` once such an answer is over, so every answer is observed by the
    same recorders (metrics, access line, request log) through one path."""

    __slots__ = ("factories", "unrecorded")

    def __init__(
        self, factories: Iterable[RecorderFactory] = (), unrecorded: UnrecordedFactory | None = None
    ) -> None:
        self.factories = tuple(factories)
        self.unrecorded = unrecorded

    def start(self, ex: Exchange, snapshot: Snapshot, key: KeySnap, raw_body: bytes) -> Recorder:
        if ex is not None:  # (tests ask for a key's recorders without an exchange)
            ex.recorded = True  # followed by the pipeline's recorders: no finish_unrecorded
        found = []  # a loop, not a comprehension: that was a function call and five cells per request
        for factory in self.factories:
            rec = factory(ex, snapshot, key, raw_body)
            if rec is not None:
                found.append(rec)
        if not found:
            return NULL_RECORDER
        return found[0] if len(found) == 1 else FanOutRecorder(found)

    def finish_unrecorded(self, ex: Exchange) -> None:
        """Observe an answer no pipeline recorder followed (``ex.recorded`` is False): its
        outcome is on the exchange (``status``, ``error``, ``key``, ``endpoint``). Never raises."""
        if self.unrecorded is None:
            return
        ex.recorded = True
        try:
            rec = self.unrecorded(ex, ex.key)
            if rec is not None:
                err = ex.error
                rec.on_finish(ex, None if err is None else f"{err.code}: {err.message}")
        except Exception:  # observing must never affect the client
            logging.getLogger("gateway.proxy").warning("recording an answer failed", exc_info=True)
