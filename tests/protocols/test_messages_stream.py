"""Messages streaming: upstream SSE decoding, client SSE encoding, and the lifecycle grammar."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from gateway.protocols import messages
from gateway.protocols.base import EncodeContext
from gateway.protocols.sse import SSEParser
from gateway.urp import (
    NodeDelta,
    NodeDone,
    NodeStart,
    ProviderControl,
    ReasoningNode,
    ResponseDone,
    ResponseStart,
    StreamError,
    TextNode,
    ToolCallNode,
    Usage,
)
from gateway.urp import events as ev
from tests.protocols.check_messages_stream import check_messages_stream


def sse(events: list[dict[str, Any]]) -> bytes:
    return b"".join(b"event: " + e["type"].encode() + b"\ndata: " + orjson.dumps(e) + b"\n\n" for e in events)


def upstream_events(*, stop: bool = True) -> list[dict[str, Any]]:
    """A realistic Anthropic stream: thinking + signature, text, two tool_use blocks."""
    events: list[dict[str, Any]] = [
        {
            "type": "message_start",
            "message": {
                "id": "msg_01",
                "type": "message",
                "role": "assistant",
                "model": "claude-sonnet-4-5",
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {
                    "input_tokens": 10,
                    "cache_creation_input_tokens": 5,
                    "cache_read_input_tokens": 100,
                    "output_tokens": 1,
                },
            },
        },
        {"type": "ping"},
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "thinking", "thinking": "", "signature": ""},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "thinking_delta", "thinking": "Let me "},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "thinking_delta", "thinking": "think."},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "signature_delta", "signature": "sig123"},
        },
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "Checking "}},
        {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "both."}},
        {"type": "content_block_stop", "index": 1},
        {
            "type": "content_block_start",
            "index": 2,
            "content_block": {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}},
        },
        {
            "type": "content_block_delta",
            "index": 2,
            "delta": {"type": "input_json_delta", "partial_json": '{"city": '},
        },
        {
            "type": "content_block_delta",
            "index": 2,
            "delta": {"type": "input_json_delta", "partial_json": '"Paris"}'},
        },
        {"type": "content_block_stop", "index": 2},
        {
            "type": "content_block_start",
            "index": 3,
            "content_block": {"type": "tool_use", "id": "toolu_2", "name": "get_time", "input": {}},
        },
        {
            "type": "content_block_delta",
            "index": 3,
            "delta": {"type": "input_json_delta", "partial_json": '{"tz": "UTC"}'},
        },
        {"type": "content_block_stop", "index": 3},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use", "stop_sequence": None},
            "usage": {"output_tokens": 42},
        },
    ]
    if stop:
        events.append({"type": "message_stop"})
    return events


def decode_all(raw: bytes) -> list:
    decoder = messages.StreamDecoder()
    parser = SSEParser()
    out: list = []
    for name, data in list(parser.feed(raw)) + list(parser.close()):
        out.extend(decoder.feed(name, data))
    out.extend(decoder.close())
    return out


def encode_all(events: list, *, source: str | None = "messages", model: str = "claude-logical") -> bytes:
    enc = messages.StreamEncoder(EncodeContext(model=model, source_protocol=source))
    return b"".join(enc.encode(e) for e in events) + enc.close()


def same_family_stream() -> bytes:
    """Upstream Anthropic SSE -> decoder -> encoder: what a Messages client receives."""
    return encode_all(decode_all(sse(upstream_events())))


def cross_family_events(*, interleaved: bool = False) -> list:
    """Events shaped like a Chat upstream decoder's: every NodeDone comes only at the end.
    ``interleaved`` additionally mixes deltas of different nodes (reasoning after text, text
    after a tool call)."""
    tool_a = ToolCallNode(call_id="call_a", name="get_weather")
    tool_b = ToolCallNode(call_id="call_b", name="get_time")
    if interleaved:
        body = [
            NodeStart(index=0, node=ReasoningNode(content="")),
            NodeDelta(index=0, kind=ev.REASONING_CONTENT, delta="Plan: "),
            NodeStart(index=1, node=TextNode(role="assistant")),
            NodeDelta(index=1, kind=ev.TEXT, delta="Hel"),
            NodeDelta(index=0, kind=ev.REASONING_CONTENT, delta="call tools."),
            NodeStart(index=2, node=tool_a),
            NodeDelta(index=2, kind=ev.ARGUMENTS, delta='{"city":'),
            NodeDelta(index=1, kind=ev.TEXT, delta="lo"),
            NodeStart(index=3, node=tool_b),
            NodeDelta(index=3, kind=ev.ARGUMENTS, delta='{"tz":"UTC"}'),
            NodeDelta(index=2, kind=ev.ARGUMENTS, delta='"Paris"}'),
        ]
    else:
        body = [
            NodeStart(index=0, node=ReasoningNode(content="")),
            NodeDelta(index=0, kind=ev.REASONING_CONTENT, delta="Plan: "),
            NodeDelta(index=0, kind=ev.REASONING_CONTENT, delta="call tools."),
            NodeStart(index=1, node=TextNode(role="assistant")),
            NodeDelta(index=1, kind=ev.TEXT, delta="Hel"),
            NodeDelta(index=1, kind=ev.TEXT, delta="lo"),
            NodeStart(index=2, node=tool_a),
            NodeDelta(index=2, kind=ev.ARGUMENTS, delta='{"city":'),
            NodeDelta(index=2, kind=ev.ARGUMENTS, delta='"Paris"}'),
            NodeStart(index=3, node=tool_b),
            NodeDelta(index=3, kind=ev.ARGUMENTS, delta='{"tz":"UTC"}'),
        ]
    output = [
        ReasoningNode(content="Plan: call tools."),
        TextNode(role="assistant", content="Hello"),
        ToolCallNode(call_id="call_a", name="get_weather", arguments='{"city":"Paris"}'),
        ToolCallNode(call_id="call_b", name="get_time", arguments='{"tz":"UTC"}'),
    ]
    return [
        ResponseStart(id="chatcmpl-1", model="gpt-x"),
        *body,
        *[NodeDone(index=i, node=n) for i, n in enumerate(output)],
        ResponseDone(
            output=output,
            finish_reason="tool_calls",
            usage=Usage(input_tokens=50, output_tokens=20, cache_read_tokens=30),
        ),
    ]


def blocks_of(events: list[tuple[str, dict]]) -> list[dict[str, Any]]:
    """Rebuild the content blocks from a checked stream."""
    blocks: list[dict[str, Any]] = []
    for name, p in events:
        if name == "content_block_start":
            blocks.append(dict(p["content_block"]))
            if blocks[-1]["type"] == "tool_use":
                blocks[-1]["_json"] = ""
        elif name == "content_block_delta":
            b, d = blocks[p["index"]], p["delta"]
            if d["type"] == "text_delta":
                b["text"] += d["text"]
            elif d["type"] == "thinking_delta":
                b["thinking"] += d["thinking"]
            elif d["type"] == "signature_delta":
                b["signature"] += d["signature"]
            elif d["type"] == "input_json_delta":
                b["_json"] += d["partial_json"]
    for b in blocks:
        if "_json" in b:
            b["input"] = orjson.loads(b.pop("_json"))
    return blocks


# -- decoder -----------------------------------------------------------------------------------


def test_decoder_maps_blocks_usage_and_stop_reason():
    events = decode_all(sse(upstream_events()))
    assert isinstance(events[0], ResponseStart) and events[0].id == "msg_01"
    assert isinstance(events[1], ProviderControl) and events[1].event_name == "ping"
    starts = [e for e in events if isinstance(e, NodeStart)]
    dones = [e for e in events if isinstance(e, NodeDone)]
    assert [e.index for e in starts] == [0, 1, 2, 3] == [e.index for e in dones]
    summary = [e for e in events if isinstance(e, NodeDelta) and e.kind == ev.REASONING_SUMMARY]
    assert [e.delta for e in summary] == ["Let me ", "think."]
    assert all(e.extra.get("_gw_summary_from_messages_thinking") for e in summary)
    done = events[-1]
    assert isinstance(done, ResponseDone)
    assert sum(isinstance(e, ResponseDone | StreamError) for e in events) == 1
    thinking, text, call1, call2 = done.output
    assert thinking.summary == "Let me think." and thinking.encrypted == "sig123"
    assert text.content == "Checking both."
    assert (call1.call_id, call1.name, orjson.loads(call1.arguments)) == (
        "toolu_1",
        "get_weather",
        {"city": "Paris"},
    )
    assert orjson.loads(call2.arguments) == {"tz": "UTC"}
    assert done.finish_reason == "tool_calls"
    assert done.extra["_gw_messages_stop_reason"] == "tool_use"
    # internal input tokens include cache reads and writes; output is the cumulative final count
    assert (done.usage.input_tokens, done.usage.output_tokens) == (115, 42)
    assert (done.usage.cache_read_tokens, done.usage.cache_creation_tokens) == (100, 5)


def test_decoder_stop_reason_in_message_delta_is_terminal_without_message_stop():
    decoder = messages.StreamDecoder()
    parser = SSEParser()
    out = []
    for name, data in parser.feed(sse(upstream_events(stop=False))):
        out.extend(decoder.feed(name, data))
    assert decoder.finished and isinstance(out[-1], ResponseDone)
    assert decoder.close() == []


def test_decoder_eof_without_terminal_is_an_error():
    events = upstream_events()[:9]
    out = decode_all(sse(events))
    assert isinstance(out[-1], StreamError) and out[-1].code == "upstream_stream_incomplete"
    assert not any(isinstance(e, ResponseDone) for e in out)


def test_decoder_error_event_and_invalid_json():
    out = decode_all(
        sse(
            upstream_events()[:3]
            + [{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}]
        )
    )
    assert isinstance(out[-1], StreamError)
    assert (out[-1].code, out[-1].message) == ("overloaded_error", "Overloaded")
    bad = messages.StreamDecoder()
    res = bad.feed("message_start", "{not json")
    assert isinstance(res[0], StreamError) and bad.finished


def test_decoder_usage_null_keeps_previous_value():
    events = upstream_events()
    events[-2]["usage"] = {"output_tokens": 42, "input_tokens": None, "cache_read_input_tokens": None}
    done = decode_all(sse(events))[-1]
    assert done.usage.input_tokens == 115 and done.usage.cache_read_tokens == 100


def test_decoder_unknown_block_becomes_provider_item_with_assembled_input():
    events = [
        upstream_events()[0],
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {
                "type": "server_tool_use",
                "id": "srvtoolu_1",
                "name": "web_search",
                "input": {},
            },
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": '{"query":'},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": '"x"}'},
        },
        {"type": "content_block_stop", "index": 0},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn", "stop_sequence": None},
            "usage": {"output_tokens": 3},
        },
    ]
    done = decode_all(sse(events))[-1]
    item = done.output[0]
    assert item.type == "provider_item" and item.item_type == "server_tool_use"
    assert item.body["input"] == {"query": "x"}


# -- encoder -----------------------------------------------------------------------------------


def test_same_family_stream_passes_lifecycle_and_keeps_content():
    events = check_messages_stream(same_family_stream())
    assert ("ping", {"type": "ping"}) not in events  # upstream pings are not forwarded
    blocks = blocks_of(events)
    assert blocks == [
        {"type": "thinking", "thinking": "Let me think.", "signature": "sig123"},
        {"type": "text", "text": "Checking both."},
        {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}},
        {"type": "tool_use", "id": "toolu_2", "name": "get_time", "input": {"tz": "UTC"}},
    ]
    start = events[0][1]["message"]
    assert start["model"] == "claude-logical"
    assert start["usage"]["input_tokens"] == 10 and start["usage"]["cache_read_input_tokens"] == 100
    delta = [p for n, p in events if n == "message_delta"][0]
    assert delta["delta"] == {"stop_reason": "tool_use", "stop_sequence": None}
    assert delta["usage"] == {
        "input_tokens": 10,
        "output_tokens": 42,
        "cache_creation_input_tokens": 5,
        "cache_read_input_tokens": 100,
    }


def test_cross_family_stream_is_incremental_although_nodes_finish_at_the_end():
    enc = messages.StreamEncoder(EncodeContext(model="claude-logical", source_protocol="chat_completion"))
    events = cross_family_events()
    sent = [enc.encode(e) for e in events]
    # the text is on the wire as soon as it arrives, not when the reasoning node finishes at the end
    text_pos = next(i for i, e in enumerate(events) if isinstance(e, NodeDelta) and e.kind == ev.TEXT)
    assert b'"text_delta","text":"Hel"' in sent[text_pos]
    parsed = check_messages_stream(b"".join(sent) + enc.close())
    assert blocks_of(parsed) == [
        {"type": "thinking", "thinking": "Plan: call tools.", "signature": ""},
        {"type": "text", "text": "Hello"},
        {"type": "tool_use", "id": "call_a", "name": "get_weather", "input": {"city": "Paris"}},
        {"type": "tool_use", "id": "call_b", "name": "get_time", "input": {"tz": "UTC"}},
    ]
    delta = [p for n, p in parsed if n == "message_delta"][0]
    assert delta["delta"]["stop_reason"] == "tool_use"
    # Anthropic wire input_tokens exclude the cache reads
    assert delta["usage"]["input_tokens"] == 20 and delta["usage"]["cache_read_input_tokens"] == 30


def test_interleaved_nodes_become_sequential_blocks_without_losing_content():
    parsed = check_messages_stream(
        encode_all(cross_family_events(interleaved=True), source="chat_completion")
    )
    blocks = blocks_of(parsed)
    assert "".join(b["thinking"] for b in blocks if b["type"] == "thinking") == "Plan: call tools."
    assert "".join(b["text"] for b in blocks if b["type"] == "text") == "Hello"
    tools = [(b["id"], b["input"]) for b in blocks if b["type"] == "tool_use"]
    assert tools == [("call_a", {"city": "Paris"}), ("call_b", {"tz": "UTC"})]  # tool blocks are never split


def test_thinking_signature_after_early_close_gets_its_own_block():
    evs = [
        NodeStart(index=0, node=ReasoningNode()),
        NodeDelta(index=0, kind=ev.REASONING_SUMMARY, delta="think"),
        NodeStart(index=1, node=TextNode(role="assistant")),
        NodeDelta(index=1, kind=ev.TEXT, delta="answer"),
        NodeDone(index=0, node=ReasoningNode(summary="think", encrypted="SIG")),
        NodeDone(index=1, node=TextNode(role="assistant", content="answer")),
        ResponseDone(output=[], finish_reason="stop"),
    ]
    blocks = blocks_of(check_messages_stream(encode_all(evs, source="responses")))
    assert blocks == [
        {"type": "thinking", "thinking": "think", "signature": ""},
        {"type": "text", "text": "answer"},
        {"type": "thinking", "thinking": "", "signature": "SIG"},
    ]


def test_empty_and_custom_nodes_leave_no_block_or_index_gap():
    custom = ToolCallNode(call_id="c1", name="apply_patch", tool_type="custom")
    out = [TextNode(role="assistant", content=""), custom, TextNode(role="assistant", content="ok")]
    evs = [
        ResponseStart(id="r", model="m"),
        NodeStart(index=0, node=TextNode(role="assistant")),
        NodeDone(index=0, node=out[0]),
        NodeStart(index=1, node=custom),
        NodeDelta(index=1, kind=ev.ARGUMENTS, delta="*** patch"),
        NodeDone(index=1, node=custom),
        NodeStart(index=2, node=TextNode(role="assistant")),
        NodeDelta(index=2, kind=ev.TEXT, delta="ok"),
        NodeDone(index=2, node=out[2]),
        ResponseDone(output=out, finish_reason="stop"),
    ]
    events = check_messages_stream(encode_all(evs, source="responses"))
    assert blocks_of(events) == [{"type": "text", "text": "ok"}]
    assert [p for n, p in events if n == "message_delta"][0]["delta"]["stop_reason"] == "end_turn"


def test_terminal_only_nodes_and_unfinished_nodes_come_from_response_done_output():
    full = [
        TextNode(role="assistant", content="partial and more"),
        ToolCallNode(call_id="t", name="f", arguments="{}"),
    ]
    evs = [
        NodeStart(index=0, node=TextNode(role="assistant")),
        NodeDelta(index=0, kind=ev.TEXT, delta="partial"),
        ResponseDone(output=full, finish_reason="tool_calls"),
    ]
    events = check_messages_stream(encode_all(evs, source="chat_completion"))
    assert blocks_of(events) == [
        {"type": "text", "text": "partial and more"},
        {"type": "tool_use", "id": "t", "name": "f", "input": {}},
    ]


def test_omitted_thinking_and_redacted_thinking():
    evs = [
        NodeStart(index=0, node=ReasoningNode()),
        NodeDelta(index=0, kind=ev.REASONING_ENCRYPTED, delta="sigX"),
        NodeDone(index=0, node=ReasoningNode(summary="", encrypted="sigX")),
        NodeStart(index=1, node=ReasoningNode(extra={"_gw_reasoning_kind": "redacted_thinking"})),
        NodeDone(
            index=1, node=ReasoningNode(encrypted="opaque", extra={"_gw_reasoning_kind": "redacted_thinking"})
        ),
        ResponseDone(output=[], finish_reason="stop"),
    ]
    events = check_messages_stream(encode_all(evs))
    assert blocks_of(events) == [
        {"type": "thinking", "thinking": "", "signature": "sigX"},
        {"type": "redacted_thinking", "data": "opaque"},
    ]


def test_mid_stream_error_sends_message_start_then_error():
    enc = messages.StreamEncoder(EncodeContext(model="m", source_protocol="messages"))
    raw = enc.encode(StreamError(message="boom", code="overloaded_error", status=529)) + enc.close()
    events = check_messages_stream(raw, allow_error=True)
    assert [n for n, _ in events] == ["message_start", "error"]
    assert events[1][1]["error"] == {
        "type": "overloaded_error",
        "message": "boom",
        "code": "overloaded_error",
    }


def test_pre_stream_error_keepalive_and_incomplete_close():
    enc = messages.StreamEncoder(EncodeContext(model="m"))
    ping = enc.keepalive()
    raw = ping + enc.error(502, "upstream_error", "All upstream attempts failed")
    events = check_messages_stream(raw, allow_error=True)
    assert [n for n, _ in events] == ["ping", "error"]
    assert enc.close() == b""

    enc = messages.StreamEncoder(EncodeContext(model="m"))
    partial = enc.encode(NodeStart(index=0, node=TextNode(role="assistant")))
    partial += enc.encode(NodeDelta(index=0, kind=ev.TEXT, delta="hi"))
    raw = partial + enc.close()
    events = check_messages_stream(raw, allow_error=True)
    assert events[-1][1]["error"]["type"] == "api_error"  # Anthropic's own types only (issue 19)
    assert events[-1][1]["error"]["code"] == "upstream_stream_incomplete"
    assert enc.close() == b""


@pytest.mark.parametrize("cut", [3, 9, 14])
def test_checker_rejects_truncated_streams(cut):
    raw = same_family_stream()
    frames = raw.split(b"\n\n")
    with pytest.raises(AssertionError):
        check_messages_stream(b"\n\n".join(frames[:cut]) + b"\n\n")


def test_checker_rejects_interleaved_blocks():
    bad = sse(
        [
            {
                "type": "message_start",
                "message": {
                    "id": "m",
                    "type": "message",
                    "role": "assistant",
                    "model": "x",
                    "content": [],
                    "usage": {"input_tokens": 0, "output_tokens": 0},
                },
            },
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
            {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}},
        ]
    )
    with pytest.raises(AssertionError, match="while block 0 is open"):
        check_messages_stream(bad)


def test_same_family_citations_survive_the_stream():
    events = [
        upstream_events()[0],
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Paris is big."}},
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {
                "type": "citations_delta",
                "citation": {
                    "type": "web_search_result_location",
                    "cited_text": "Paris...",
                    "url": "https://x.test",
                },
            },
        },
        {"type": "content_block_stop", "index": 0},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn", "stop_sequence": None},
            "usage": {"output_tokens": 3},
        },
        {"type": "message_stop"},
    ]
    decoded = decode_all(sse(events))
    assert decoded[-1].output[0].extra["citations"][0]["url"] == "https://x.test"
    parsed = check_messages_stream(encode_all(decoded))
    cites = [
        p["delta"]["citation"]
        for n, p in parsed
        if n == "content_block_delta" and p["delta"]["type"] == "citations_delta"
    ]
    assert cites == [
        {"type": "web_search_result_location", "cited_text": "Paris...", "url": "https://x.test"}
    ]


# -- fuzz regressions (tests/fuzz) ----------------------------------------------------------------


def test_garbage_indexes_block_fields_and_deep_events_do_not_crash_the_decoder():
    """An object as a delta/stop ``index`` crashed the slot lookup; an object as a started
    block's text/thinking/signature crashed the concatenation; an event nested deeper than we
    could write back is a stream error."""
    raw = sse(
        [
            {
                "type": "message_start",
                "message": {
                    "id": "msg_1",
                    "type": "message",
                    "role": "assistant",
                    "model": "m",
                    "content": [],
                    "usage": {"input_tokens": 3, "output_tokens": 1},
                },
            },
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": {"x": 1}}},
            {
                "type": "content_block_delta",
                "index": {"i": 0},
                "delta": {"type": "text_delta", "text": "lost"},
            },
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "kept"}},
            {"type": "content_block_stop", "index": [0]},
            {"type": "content_block_stop", "index": 0},
            {
                "type": "content_block_start",
                "index": 1,
                "content_block": {"type": "thinking", "thinking": ["t"], "signature": {"s": 1}},
            },
            {"type": "content_block_stop", "index": 1},
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn"},
                "usage": {"output_tokens": 2, "cache_creation_input_tokens": 2**64 - 1},
            },
            {"type": "message_stop"},
        ]
    )
    events = decode_all(raw)
    assert isinstance(events[-1], ev.ResponseDone)
    assert [n.content for n in events[-1].output if isinstance(n, TextNode)] == ["kept"]
    for client in ("chat_completion", "responses", "messages"):
        from gateway.protocols import codec

        enc = codec(client).StreamEncoder(EncodeContext(model="l", source_protocol="messages"))
        b"".join(enc.encode(e) for e in events)

    deep = messages.StreamDecoder()
    out = deep.feed(
        "content_block_delta",
        '{"type": "content_block_delta", "index": 0, "delta": ' + "[" * 300 + "]" * 300 + "}",
    )
    assert isinstance(out[-1], ev.StreamError) and out[-1].code == "invalid_upstream_response"


def test_server_tool_input_assembled_too_deep_stays_text():
    """Each fragment is shallow, but together they can spell JSON nested deeper than orjson
    writes; the assembled input then stays text instead of crashing the client encoder."""
    from gateway.protocols import codec

    deep = "[" * 300 + "]" * 300
    raw = sse(
        [
            {
                "type": "message_start",
                "message": {
                    "id": "msg_1",
                    "type": "message",
                    "role": "assistant",
                    "model": "m",
                    "content": [],
                    "usage": {"input_tokens": 3, "output_tokens": 1},
                },
            },
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {
                    "type": "server_tool_use",
                    "id": "srv_1",
                    "name": "web_search",
                    "input": {},
                },
            },
            *(
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "input_json_delta", "partial_json": part},
                }
                for part in ('{"q": ', deep[:300], deep[300:], "}")
            ),
            {"type": "content_block_stop", "index": 0},
            {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 2}},
            {"type": "message_stop"},
        ]
    )
    events = decode_all(raw)
    assert isinstance(events[-1], ev.ResponseDone)
    item = events[-1].output[0]
    assert item.body["input"] == '{"q": ' + deep + "}"
    for client in ("chat_completion", "responses", "messages"):
        enc = codec(client).StreamEncoder(EncodeContext(model="l", source_protocol="messages"))
        b"".join(enc.encode(e) for e in events)
