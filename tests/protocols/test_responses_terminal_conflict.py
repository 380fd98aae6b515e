"""Issue 13 / reference §4.4: a Responses terminal object whose output contradicts what was
streamed ends the stream with ``responses_terminal_conflict``; whitespace-only differences are
tolerated."""

from __future__ import annotations

import orjson
import pytest

from gateway.protocols import codec
from gateway.urp import events as ev


def _run(final_text: str, final_args: str = '{"a":1}') -> list:
    events = [
        (
            "response.created",
            {"type": "response.created", "response": {"id": "r1", "model": "m", "status": "in_progress"}},
        ),
        (
            "response.output_item.added",
            {
                "type": "response.output_item.added",
                "output_index": 0,
                "item": {"id": "m1", "type": "message", "role": "assistant", "content": []},
            },
        ),
        (
            "response.content_part.added",
            {
                "type": "response.content_part.added",
                "item_id": "m1",
                "output_index": 0,
                "content_index": 0,
                "part": {"type": "output_text", "text": ""},
            },
        ),
        (
            "response.output_text.delta",
            {
                "type": "response.output_text.delta",
                "item_id": "m1",
                "output_index": 0,
                "content_index": 0,
                "delta": "Hello world",
            },
        ),
        (
            "response.output_item.added",
            {
                "type": "response.output_item.added",
                "output_index": 1,
                "item": {"id": "f1", "type": "function_call", "call_id": "c1", "name": "t", "arguments": ""},
            },
        ),
        (
            "response.function_call_arguments.delta",
            {
                "type": "response.function_call_arguments.delta",
                "item_id": "f1",
                "output_index": 1,
                "delta": '{"a":1}',
            },
        ),
        (
            "response.completed",
            {
                "type": "response.completed",
                "response": {
                    "id": "r1",
                    "model": "m",
                    "status": "completed",
                    "output": [
                        {
                            "id": "m1",
                            "type": "message",
                            "role": "assistant",
                            "content": [{"type": "output_text", "text": final_text}],
                        },
                        {
                            "id": "f1",
                            "type": "function_call",
                            "call_id": "c1",
                            "name": "t",
                            "arguments": final_args,
                        },
                    ],
                },
            },
        ),
    ]
    decoder = codec("responses").StreamDecoder()
    out = []
    for name, payload in events:
        out.extend(decoder.feed(name, orjson.dumps(payload).decode()))
    return out


@pytest.mark.parametrize("text,args", [("Goodbye", '{"a":1}'), ("Hello world", '{"a":2}')])
def test_conflicting_terminal_output_is_an_error(text, args):
    out = _run(text, args)
    errors = [e for e in out if isinstance(e, ev.StreamError)]
    assert errors and errors[-1].code == "responses_terminal_conflict"
    assert not any(isinstance(e, ev.ResponseDone) for e in out)


def test_whitespace_only_differences_are_tolerated():
    out = _run("Hello  world\n")
    assert not any(isinstance(e, ev.StreamError) for e in out)
    assert isinstance(out[-1], ev.ResponseDone)
