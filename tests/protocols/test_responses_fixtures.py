"""Shared fixtures for the Responses codec tests (no tests here): a realistic upstream SSE stream
and helpers to run bytes through the decoder and encoder."""

from __future__ import annotations

from typing import Any

import orjson

from gateway.protocols import responses
from gateway.protocols.base import EncodeContext
from gateway.protocols.sse import SSEParser
from gateway.urp import events as ev

PATCH = "*** Begin Patch\n*** Add File: hello.txt\n+hi\n*** End Patch"


def sse(events: list[dict[str, Any]], *, done: bool = False) -> bytes:
    out = b"".join(b"event: " + e["type"].encode() + b"\ndata: " + orjson.dumps(e) + b"\n\n" for e in events)
    return out + (b"data: [DONE]\n\n" if done else b"")


def _resp(status: str, output: list | None = None, usage: dict | None = None) -> dict[str, Any]:
    return {
        "id": "resp_up",
        "object": "response",
        "created_at": 1741476542,
        "status": status,
        "error": None,
        "incomplete_details": None,
        "model": "gpt-5",
        "output": output or [],
        "usage": usage,
        "tools": [],
        "tool_choice": "auto",
        "parallel_tool_calls": True,
        "service_tier": "auto",
    }


FINAL_OUTPUT = [
    {
        "id": "rs_1",
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": "Plan the work"}],
        "encrypted_content": "gAAAAenc",
    },
    {
        "id": "msg_1",
        "type": "message",
        "status": "completed",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "Hello world", "annotations": []}],
    },
    {
        "id": "fc_1",
        "type": "function_call",
        "status": "completed",
        "call_id": "call_1",
        "name": "get_weather",
        "arguments": '{"city":"Paris"}',
    },
    {
        "id": "fc_2",
        "type": "function_call",
        "status": "completed",
        "call_id": "call_2",
        "name": "get_time",
        "arguments": '{"tz":"CET"}',
    },
    {"id": "ctc_1", "type": "custom_tool_call", "call_id": "call_3", "name": "apply_patch", "input": PATCH},
]
USAGE = {
    "input_tokens": 120,
    "input_tokens_details": {"cached_tokens": 100},
    "output_tokens": 42,
    "output_tokens_details": {"reasoning_tokens": 16},
    "total_tokens": 162,
}


def upstream_events() -> list[dict[str, Any]]:
    """What api.openai.com streams for reasoning + text + two parallel calls + a custom call."""
    seq = iter(range(1, 1000))

    def e(t: str, **kw: Any) -> dict[str, Any]:
        return {"type": t, "sequence_number": next(seq), **kw}

    rs = {"id": "rs_1", "type": "reasoning", "summary": []}
    msg = {"id": "msg_1", "type": "message", "status": "in_progress", "role": "assistant", "content": []}
    fc1 = {
        "id": "fc_1",
        "type": "function_call",
        "status": "in_progress",
        "call_id": "call_1",
        "name": "get_weather",
        "arguments": "",
    }
    fc2 = {
        "id": "fc_2",
        "type": "function_call",
        "status": "in_progress",
        "call_id": "call_2",
        "name": "get_time",
        "arguments": "",
    }
    ctc = {"id": "ctc_1", "type": "custom_tool_call", "call_id": "call_3", "name": "apply_patch", "input": ""}
    part = {"type": "output_text", "text": "", "annotations": []}
    return [
        e("response.created", response=_resp("in_progress")),
        e("response.in_progress", response=_resp("in_progress")),
        e("response.output_item.added", output_index=0, item=rs),
        e(
            "response.reasoning_summary_part.added",
            item_id="rs_1",
            output_index=0,
            summary_index=0,
            part={"type": "summary_text", "text": ""},
        ),
        e(
            "response.reasoning_summary_text.delta",
            item_id="rs_1",
            output_index=0,
            summary_index=0,
            delta="Plan ",
        ),
        e(
            "response.reasoning_summary_text.delta",
            item_id="rs_1",
            output_index=0,
            summary_index=0,
            delta="the work",
        ),
        e(
            "response.reasoning_summary_text.done",
            item_id="rs_1",
            output_index=0,
            summary_index=0,
            text="Plan the work",
        ),
        e(
            "response.reasoning_summary_part.done",
            item_id="rs_1",
            output_index=0,
            summary_index=0,
            part={"type": "summary_text", "text": "Plan the work"},
        ),
        e("response.output_item.done", output_index=0, item=FINAL_OUTPUT[0]),
        e("response.output_item.added", output_index=1, item=msg),
        e("response.content_part.added", item_id="msg_1", output_index=1, content_index=0, part=part),
        e(
            "response.output_text.delta",
            item_id="msg_1",
            output_index=1,
            content_index=0,
            delta="Hello",
            logprobs=[],
        ),
        e(
            "response.output_text.delta",
            item_id="msg_1",
            output_index=1,
            content_index=0,
            delta=" world",
            logprobs=[],
        ),
        e(
            "response.output_text.done",
            item_id="msg_1",
            output_index=1,
            content_index=0,
            text="Hello world",
            logprobs=[],
        ),
        e(
            "response.content_part.done",
            item_id="msg_1",
            output_index=1,
            content_index=0,
            part={**part, "text": "Hello world"},
        ),
        e("response.output_item.done", output_index=1, item=FINAL_OUTPUT[1]),
        e("response.output_item.added", output_index=2, item=fc1),
        e("response.output_item.added", output_index=3, item=fc2),
        e("response.function_call_arguments.delta", item_id="fc_1", output_index=2, delta='{"city":'),
        e("response.function_call_arguments.delta", item_id="fc_2", output_index=3, delta='{"tz":"CET"}'),
        e("response.function_call_arguments.delta", item_id="fc_1", output_index=2, delta='"Paris"}'),
        e(
            "response.function_call_arguments.done",
            item_id="fc_1",
            output_index=2,
            arguments='{"city":"Paris"}',
        ),
        e("response.output_item.done", output_index=2, item=FINAL_OUTPUT[2]),
        e("response.function_call_arguments.done", item_id="fc_2", output_index=3, arguments='{"tz":"CET"}'),
        e("response.output_item.done", output_index=3, item=FINAL_OUTPUT[3]),
        e("response.output_item.added", output_index=4, item=ctc),
        e("response.custom_tool_call_input.delta", item_id="ctc_1", output_index=4, delta=PATCH[:20]),
        e("response.custom_tool_call_input.delta", item_id="ctc_1", output_index=4, delta=PATCH[20:]),
        e("response.custom_tool_call_input.done", item_id="ctc_1", output_index=4, input=PATCH),
        e("response.output_item.done", output_index=4, item=FINAL_OUTPUT[4]),
        e("response.completed", response=_resp("completed", FINAL_OUTPUT, USAGE)),
    ]


def decode_bytes(raw: bytes, *, chunk: int = 0) -> list[ev.Event]:
    """Upstream SSE bytes -> canonical events (optionally fed in small chunks)."""
    parser = SSEParser()
    dec = responses.StreamDecoder()
    out: list[ev.Event] = []
    pieces = [raw[i : i + chunk] for i in range(0, len(raw), chunk)] if chunk else [raw]
    for piece in pieces:
        for name, data in parser.feed(piece):
            out.extend(dec.feed(name, data))
    for name, data in parser.close():
        out.extend(dec.feed(name, data))
    out.extend(dec.close())
    assert dec.finished
    return out


def encode_events(events: list[ev.Event], *, source: str = "responses", model: str = "alias") -> bytes:
    enc = responses.StreamEncoder(EncodeContext(model=model, source_protocol=source))
    return b"".join(enc.encode(e) for e in events) + enc.close()


def check_invariants(events: list[ev.Event]) -> None:
    """The URP stream invariants of gateway/urp/events.py."""
    starts: dict[int, int] = {}
    dones: dict[int, int] = {}
    for e in events:
        if isinstance(e, ev.NodeStart):
            assert e.index not in starts, f"second NodeStart for {e.index}"
            assert e.index == len(starts), "node indices must be 0,1,2... in first-seen order"
            starts[e.index] = 1
        elif isinstance(e, ev.NodeDelta):
            assert e.index in starts and e.index not in dones, f"delta outside node {e.index}"
        elif isinstance(e, ev.NodeDone):
            assert e.index in starts and e.index not in dones
            dones[e.index] = 1
    terminals = [e for e in events if isinstance(e, ev.ResponseDone | ev.StreamError)]
    assert len(terminals) == 1 and events[-1] is terminals[0], "exactly one terminal event, last"
    if isinstance(terminals[0], ev.ResponseDone):
        # An error terminal may leave truncated nodes open; a success closes every node.
        assert starts.keys() == dones.keys(), "every node needs exactly one NodeDone"
