"""Chat Completions streaming: upstream decoder invariants and the client encoder's lifecycle."""

from __future__ import annotations

import orjson
import pytest

from gateway.protocols import chat as cc
from gateway.protocols.base import EncodeContext
from gateway.protocols.sse import SSEParser
from gateway.urp import ReasoningNode, TextNode, ToolCallNode, Usage
from gateway.urp import events as ev

from .check_chat_stream import assemble, check_chat_stream


def chunk(delta=None, finish=None, **top):
    body = {"id": "chatcmpl-up", "object": "chat.completion.chunk", "created": 5, "model": "up"}
    if delta is not None or finish is not None:
        body["choices"] = [{"index": 0, "delta": delta or {}, "finish_reason": finish}]
    else:
        body["choices"] = []
    body.update(top)
    return "data: " + orjson.dumps(body).decode() + "\n\n"


UPSTREAM_TOOLS = "".join(
    [
        chunk({"role": "assistant", "content": ""}),
        chunk(
            {"reasoning": "Th", "reasoning_details": [{"type": "reasoning.text", "text": "Th", "index": 0}]}
        ),
        chunk({"reasoning_details": [{"type": "reasoning.text", "text": "ink", "index": 0}]}),
        chunk({"content": "Checking"}),
        chunk({"content": " both."}),
        chunk(
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "call_a",
                        "type": "function",
                        "function": {"name": "get", "arguments": ""},
                    }
                ]
            }
        ),
        chunk(
            {
                "tool_calls": [
                    {
                        "index": 1,
                        "id": "call_b",
                        "type": "function",
                        "function": {"name": "get", "arguments": '{"c":'},
                    }
                ]
            }
        ),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"c":"Paris"}'}}]}),
        chunk({"tool_calls": [{"index": 1, "function": {"arguments": '"Rome"}'}}]}),
        chunk({}, "tool_calls"),
        chunk(
            usage={
                "prompt_tokens": 11,
                "completion_tokens": 7,
                "total_tokens": 18,
                "prompt_tokens_details": {"cached_tokens": 4},
            }
        ),
        "data: [DONE]\n\n",
    ]
).encode()


def decode_all(raw: bytes, split: int | None = None) -> list[ev.Event]:
    parser, dec, out = SSEParser(), cc.StreamDecoder(), []
    step = split or len(raw)
    for i in range(0, len(raw), step):
        for name, data in parser.feed(raw[i : i + step]):
            out.extend(dec.feed(name, data))
    for name, data in parser.close():
        out.extend(dec.feed(name, data))
    out.extend(dec.close())
    assert dec.finished
    return out


def check_invariants(events: list[ev.Event]) -> None:
    starts = [e.index for e in events if isinstance(e, ev.NodeStart)]
    dones = [e.index for e in events if isinstance(e, ev.NodeDone)]
    assert starts == list(range(len(starts))), "indices 0,1,2... in first-seen order"
    assert sorted(dones) == starts, "exactly one NodeDone per NodeStart"
    terminals = [e for e in events if isinstance(e, ev.ResponseDone | ev.StreamError)]
    assert len(terminals) == 1 and events[-1] is terminals[0], "one terminal event, last"
    for e in events:
        if isinstance(e, ev.NodeDelta):
            assert e.index in starts[: e.index + 1] and e.index not in dones[: dones.index(e.index)]


@pytest.mark.parametrize("split", [None, 7])
def test_decoder_reassembles_parallel_tool_calls_reasoning_and_usage(split):
    events = decode_all(UPSTREAM_TOOLS, split)
    check_invariants(events)
    assert isinstance(events[0], ev.ResponseStart) and events[0].id == "chatcmpl-up"
    done = events[-1]
    assert isinstance(done, ev.ResponseDone)
    kinds = [type(n).__name__ for n in done.output]
    assert kinds == ["ReasoningNode", "TextNode", "ToolCallNode", "ToolCallNode"]
    assert done.output[0].content == "Think"
    assert done.output[1].content == "Checking both."
    assert [(n.call_id, n.arguments) for n in done.output[2:]] == [
        ("call_a", '{"c":"Paris"}'),
        ("call_b", '{"c":"Rome"}'),
    ]
    assert done.finish_reason == "tool_calls"
    assert (done.usage.input_tokens, done.usage.output_tokens, done.usage.cache_read_tokens) == (11, 7, 4)


def test_done_before_finish_and_eof_without_finish_are_errors():
    early = (chunk({"role": "assistant"}) + chunk({"content": "hi"}) + "data: [DONE]\n\n").encode()
    events = decode_all(early)
    check_invariants(events) if any(isinstance(e, ev.NodeDone) for e in events) else None
    assert isinstance(events[-1], ev.StreamError) and events[-1].code == "upstream_stream_incomplete"
    eof = (chunk({"role": "assistant"}) + chunk({"content": "hi"})).encode()
    events = decode_all(eof)
    assert isinstance(events[-1], ev.StreamError) and events[-1].code == "upstream_stream_incomplete"


def test_finish_without_done_is_success_at_eof():
    raw = (chunk({"content": "hi"}) + chunk({}, "stop")).encode()
    events = decode_all(raw)
    assert isinstance(events[-1], ev.ResponseDone) and events[-1].output[0].content == "hi"


@pytest.mark.parametrize(
    "bad",
    [
        'data: {"error": {"message": "overloaded", "code": 529, "type": "overloaded_error"}}\n\n',
        chunk({"content": ""}, "error"),
        'data: {"id": "x", "choices": [{"index": 0, "delta": {}, "error": {"message": "boom"}}]}\n\n',
        "data: {not json\n\n",
    ],
)
def test_embedded_stream_errors_are_terminal(bad):
    events = decode_all((chunk({"content": "a"}) + bad + chunk({"content": "ignored"}, "stop")).encode())
    assert isinstance(events[-1], ev.StreamError)
    assert not any(isinstance(e, ev.ResponseDone) for e in events)


def test_scalar_reasoning_content_and_reasoning_details_grouping():
    raw = (
        chunk({"reasoning_content": "a"})
        + chunk({"reasoning_content": "b"})
        + chunk({"content": "x"})
        + chunk({}, "stop")
        + "data: [DONE]\n\n"
    ).encode()
    done = decode_all(raw)[-1]
    assert (
        done.output[0].content == "ab"
        and done.output[0].extra["_gw_chat_reasoning_surface"] == "reasoning_content"
    )
    raw = (
        chunk({"reasoning_details": [{"type": "reasoning.summary", "summary": "s1", "index": 0}]})
        + chunk(
            {
                "reasoning_details": [
                    {"type": "reasoning.summary", "summary": "s2", "index": 0},
                    {"type": "reasoning.encrypted", "data": "ENC", "index": 1},
                ]
            }
        )
        + chunk({}, "stop")
        + "data: [DONE]\n\n"
    ).encode()
    done = decode_all(raw)[-1]
    assert [n.summary for n in done.output] == ["s1s2", None]
    assert done.output[1].encrypted == "ENC"


# -- encoder ------------------------------------------------------------------------------


def encode_events(events, **ctx) -> bytes:
    enc = cc.StreamEncoder(EncodeContext(model="logical", **ctx))
    return b"".join(enc.encode(e) for e in events) + enc.close()


def test_pipeline_same_protocol_keeps_content_calls_and_usage():
    raw = encode_events(decode_all(UPSTREAM_TOOLS), source_protocol="chat_completion", include_usage=True)
    chunks = check_chat_stream(raw, include_usage=True)
    got = assemble(chunks)
    assert got["text"] == "Checking both."
    assert got["reasoning"] == "Think"
    assert [(c["id"], c["name"], c["arguments"]) for c in got["tool_calls"]] == [
        ("call_a", "get", '{"c":"Paris"}'),
        ("call_b", "get", '{"c":"Rome"}'),
    ]
    assert got["finish_reason"] == "tool_calls"
    assert got["usage"]["prompt_tokens"] == 11 and got["usage"]["prompt_tokens_details"] == {
        "cached_tokens": 4
    }
    assert chunks[0]["model"] == "logical" and chunks[0]["id"] == "chatcmpl-up"


def test_no_usage_chunk_unless_asked():
    raw = encode_events(decode_all(UPSTREAM_TOOLS), include_usage=False)
    check_chat_stream(raw, include_usage=False)


def _synthetic(output, finish="stop", usage=None, stream_nodes=True):
    events = [ev.ResponseStart(id="resp_1", model="up")]
    if stream_nodes:
        for i, node in enumerate(output):
            head = type(node)(
                **{
                    **{
                        f: getattr(node, f)
                        for f in node.__slots__
                        if f in ("call_id", "name", "tool_type", "role")
                    }
                }
            )
            events.append(ev.NodeStart(index=i, node=head))
            if isinstance(node, TextNode):
                for part in (node.content[:2], node.content[2:]):
                    events.append(ev.NodeDelta(index=i, kind=ev.TEXT, delta=part))
            elif isinstance(node, ToolCallNode):
                events.append(ev.NodeDelta(index=i, kind=ev.ARGUMENTS, delta=node.arguments))
            elif isinstance(node, ReasoningNode) and node.summary:
                events.append(ev.NodeDelta(index=i, kind=ev.REASONING_SUMMARY, delta=node.summary))
            events.append(ev.NodeDone(index=i, node=node))
    events.append(ev.ResponseDone(output=output, finish_reason=finish, usage=usage))
    return events


def test_cross_protocol_stream_with_signature_and_custom_tool():
    output = [
        ReasoningNode(summary="consider", encrypted="SIG"),
        TextNode(role="assistant", content="Hello"),
        ToolCallNode(call_id="t1", name="apply_patch", arguments="*** Begin", tool_type="custom"),
    ]
    raw = encode_events(
        _synthetic(output, usage=Usage(input_tokens=3, output_tokens=4)),
        source_protocol="messages",
        include_usage=True,
    )
    chunks = check_chat_stream(raw, include_usage=True)
    got = assemble(chunks)
    assert got["text"] == "Hello"
    assert [d["type"] for d in got["details"]] == ["reasoning.summary", "reasoning.encrypted"]
    assert got["details"][1]["data"] == "SIG"
    assert got["tool_calls"] == [
        {"id": "t1", "type": "custom", "name": "apply_patch", "arguments": "*** Begin"}
    ]
    assert got["finish_reason"] == "tool_calls"
    assert chunks[-1]["usage"] == {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}


def test_terminal_only_nodes_are_emitted_before_finish_once():
    output = [
        TextNode(role="assistant", content="only at the end"),
        ToolCallNode(call_id="z", name="f", arguments="{}"),
    ]
    raw = encode_events(_synthetic(output, stream_nodes=False), include_usage=False)
    got = assemble(check_chat_stream(raw, include_usage=False))
    assert got["text"] == "only at the end" and len(got["tool_calls"]) == 1


def test_missing_suffix_from_node_done_snapshot_is_written():
    events = [
        ev.ResponseStart(id="r", model="m"),
        ev.NodeStart(index=0, node=TextNode(role="assistant")),
        ev.NodeDelta(index=0, kind=ev.TEXT, delta="Hel"),
        ev.NodeDone(index=0, node=TextNode(role="assistant", content="Hello")),
        ev.ResponseDone(output=[TextNode(role="assistant", content="Hello")], finish_reason="length"),
    ]
    got = assemble(check_chat_stream(encode_events(events)))
    assert got["text"] == "Hello" and got["finish_reason"] == "length"


def test_mid_stream_error_and_incomplete_close():
    events = [
        ev.ResponseStart(id="r", model="m"),
        ev.NodeStart(index=0, node=TextNode(role="assistant")),
        ev.NodeDelta(index=0, kind=ev.TEXT, delta="partial"),
        ev.StreamError(message="upstream died", code="upstream_error", status=502),
    ]
    chunks = check_chat_stream(encode_events(events))
    assert (
        chunks[-1]["error"]["code"] == "upstream_error" and chunks[-1]["error"]["message"] == "upstream died"
    )
    enc = cc.StreamEncoder(EncodeContext(model="m"))
    raw = enc.encode(events[0]) + enc.encode(events[1]) + enc.close()
    chunks = check_chat_stream(raw)
    assert chunks[-1]["error"]["code"] == "upstream_stream_incomplete"
    assert enc.close() == b""


def test_pre_stream_error_and_keepalive():
    enc = cc.StreamEncoder(EncodeContext(model="m"))
    raw = enc.keepalive() + enc.error(502, "upstream_error", "All upstream attempts failed")
    chunks = check_chat_stream(raw)
    assert chunks == [
        {
            "error": {
                "message": "All upstream attempts failed",
                "type": "api_error",
                "param": None,
                "code": "upstream_error",
            }
        }
    ]
    assert enc.close() == b""
    assert enc.keepalive().startswith(b":")


def test_terminal_message_snapshot_fills_only_what_deltas_missed():
    raw = (
        chunk({"content": "Hel"})
        + 'data: {"id": "x", "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls", "message": '
        '{"role": "assistant", "content": "Hello", "tool_calls": [{"id": "c9", "type": "function", '
        '"function": {"name": "f", "arguments": "{}"}}]}}]}\n\n' + "data: [DONE]\n\n"
    ).encode()
    events = decode_all(raw)
    check_invariants(events)
    done = events[-1]
    assert done.output[0].content == "Hello"
    assert [(n.call_id, n.name, n.arguments) for n in done.output[1:]] == [("c9", "f", "{}")]


def test_choice_logprobs_ride_along_on_a_same_chat_stream():
    lp = {"content": [{"token": "Hi", "logprob": -0.1}]}
    raw = (
        'data: {"id": "chatcmpl-1", "choices": [{"index": 0, "delta": {"content": "Hi"}, "logprobs": '
        + orjson.dumps(lp).decode()
        + ', "finish_reason": null}]}\n\n'
        + chunk({}, "stop")
        + "data: [DONE]\n\n"
    ).encode()
    chunks = check_chat_stream(encode_events(decode_all(raw), source_protocol="chat_completion"))
    content = [c for c in chunks if c["choices"] and c["choices"][0]["delta"].get("content")]
    assert content[0]["choices"][0]["logprobs"] == lp
    other = encode_events(decode_all(raw), source_protocol="responses")
    assert b"logprobs" not in other


def test_openrouter_error_metadata_fallbacks():
    raw = (
        b'data: {"id": "x", "choices": [{"index": 0, "delta": {}, "finish_reason": "error", "error": '
        b'{"message": "Provider returned error", "metadata": {"provider_code": "overloaded", '
        b'"error_type": "server_error"}}}]}\n\n'
    )
    err = decode_all(raw)[-1]
    assert isinstance(err, ev.StreamError)
    assert (err.code, err.error_type, err.message) == (
        "overloaded",
        "server_error",
        "Provider returned error",
    )
    chunks = check_chat_stream(encode_events([err], source_protocol="chat_completion"))
    assert chunks[-1]["error"]["code"] == "overloaded" and chunks[-1]["error"]["type"] == "server_error"


def test_encoder_is_incremental():
    enc = cc.StreamEncoder(EncodeContext(model="m"))
    assert b'"role":"assistant"' in enc.encode(ev.ResponseStart(id="r", model="m"))
    assert enc.encode(ev.NodeStart(index=0, node=TextNode(role="assistant"))) == b""
    assert b'"content":"Hel"' in enc.encode(ev.NodeDelta(index=0, kind=ev.TEXT, delta="Hel"))
    head = enc.encode(ev.NodeStart(index=1, node=ToolCallNode(call_id="c", name="f")))
    assert b'"id":"c"' in head and b'"name":"f"' in head
    assert b'"arguments":"{}"' in enc.encode(ev.NodeDelta(index=1, kind=ev.ARGUMENTS, delta="{}"))


# -- fuzz regressions (tests/fuzz) ----------------------------------------------------------------


def test_garbage_indexes_and_reasoning_fields_do_not_crash_the_decoder():
    """Objects where the tool-call index, the reasoning-detail index/type or its text belong
    used to crash dict lookups and string concatenation mid-stream."""
    raw = "".join(
        [
            chunk({"role": "assistant", "content": ""}),
            chunk(
                {
                    "reasoning_details": [
                        {"type": {"t": 1}, "text": "a", "index": {"i": 1}},
                        {"type": "reasoning.text", "text": {"x": 1}, "index": 0},
                        {"type": "reasoning.summary", "summary": [1], "id": ["x"]},
                    ]
                }
            ),
            chunk(
                {
                    "tool_calls": [
                        {
                            "index": {"i": 0},
                            "id": "call_a",
                            "type": "function",
                            "function": {"name": "get", "arguments": "{}"},
                        }
                    ]
                }
            ),
            chunk({}, "tool_calls"),
            "data: [DONE]\n\n",
        ]
    ).encode()
    events = decode_all(raw)
    assert isinstance(events[-1], ev.ResponseDone)
    assert [n.name for n in events[-1].output if isinstance(n, ToolCallNode)] == ["get"]


def test_absurd_usage_and_deep_chunks():
    """Counters near 2**64 are dropped (their sums would not serialise); a chunk nested deeper
    than we could write back is a stream error, not an exception."""
    raw = "".join(
        [
            chunk({"content": "hi"}),
            chunk({}, "stop"),
            chunk(usage={"prompt_tokens": 2**64 - 1, "completion_tokens": 2**64 - 1}),
            "data: [DONE]\n\n",
        ]
    ).encode()
    events = decode_all(raw)
    assert events[-1].usage.input_tokens == 0
    enc = cc.StreamEncoder(EncodeContext(model="l", source_protocol="chat_completion"))
    assert b"".join(enc.encode(e) for e in events).endswith(b"data: [DONE]\n\n")

    dec = cc.StreamDecoder()
    out = dec.feed(None, '{"choices": [{"index": 0, "delta": {"content": ' + "[" * 300 + "]" * 300 + "}}]}")
    assert isinstance(out[-1], ev.StreamError) and out[-1].code == "invalid_upstream_response"
