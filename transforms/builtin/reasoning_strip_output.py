"""reasoning_strip_output: remove reasoning from the response, for clients that cannot take it
(or should not see it).

Whole responses: every reasoning node leaves ``output`` (and so does reasoning text a Chat
decoder kept on a control node for same-protocol replay).

Streams: a reasoning node's start, deltas and done are dropped, and every later node is
renumbered so indices stay dense and equal to positions in ``ResponseDone.output`` (which drops
the reasoning nodes too). The reference kept the lifecycle by turning reasoning into an empty
text node; an empty text block is not nothing to an SDK (a Messages client would end with an
extra empty text block), so the stream would not end where the whole response does. Dropping
whole lifecycles keeps every remaining node's start/delta/done valid and gives SDK accumulators
exactly the whole-response result.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from gateway.urp import ReasoningNode, Response
from gateway.urp.events import Event, NodeDelta, NodeDone, NodeStart, ResponseDone
from transforms.base import Transform, TransformContext, TransformExample
from transforms.lib.reasoning_helpers import NO_CONFIG, drop_reasoning_scalars


@dataclass(slots=True)
class _State:
    next: int = 0
    remap: dict[int, int] = field(default_factory=dict)
    stripped: set[int] = field(default_factory=set)


class ReasoningStripOutput(Transform):
    type_id = "reasoning_strip_output"
    category = "reasoning"
    name = {"en": "Reasoning: strip from response output", "zh": "推理：从响应输出中移除"}
    description = {
        "en": "Removes every reasoning node from responses and streams (the remaining nodes stream unchanged).",
        "zh": "从响应和流中移除所有推理节点（其余节点照常流式输出）。",
    }
    phases = ("response",)
    aliases = ("strip_reasoning",)
    config_schema = NO_CONFIG
    examples = (
        TransformExample(
            title="Reasoning is removed, the answer stays",
            phase="response",
            protocol="messages",
            input={
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": "claude",
                "stop_reason": "end_turn",
                "stop_sequence": None,
                "usage": {"input_tokens": 1, "output_tokens": 1},
                "content": [
                    {"type": "thinking", "thinking": "hmm", "signature": "sig"},
                    {"type": "text", "text": "hi"},
                ],
            },
            expected={"content": [{"type": "text", "text": "hi"}]},
        ),
    )

    def apply_response(self, resp: Response, ctx: TransformContext) -> None:
        resp.output = [n for n in resp.output if type(n) is not ReasoningNode]
        drop_reasoning_scalars(resp.output)

    def new_stream_state(self, ctx: TransformContext) -> _State:
        return _State()

    def apply_event(self, event: Event, state: _State, ctx: TransformContext) -> list[Event]:
        if isinstance(event, NodeStart):
            if type(event.node) is ReasoningNode:
                state.stripped.add(event.index)
                return []
            new = state.remap[event.index] = state.next
            state.next += 1
            return [event] if new == event.index else [replace(event, index=new)]
        if isinstance(event, NodeDelta | NodeDone):
            index = event.index
            if index in state.stripped:
                return []
            mapped = state.remap.get(index)
            if mapped is None:
                if isinstance(event, NodeDelta):
                    return [event]
                if type(event.node) is ReasoningNode:  # done without a start
                    state.stripped.add(index)
                    return []
                mapped = state.remap[index] = state.next
                state.next += 1
            new = mapped
            return [event] if new == index else [replace(event, index=new)]
        if isinstance(event, ResponseDone):
            event.output = [n for n in event.output if type(n) is not ReasoningNode]
            drop_reasoning_scalars(event.output)
        return [event]
