"""Responses streaming: upstream SSE bytes -> URP events -> client SSE bytes."""

from __future__ import annotations

import orjson
import pytest

from gateway.protocols import responses
from gateway.protocols.base import EncodeContext
from gateway.urp import events as ev
from gateway.urp.nodes import ReasoningNode, RefusalNode, TextNode, ToolCallNode
from gateway.urp.request import Usage

from .check_responses_stream import check_responses_stream, parse_frames
from .test_responses_fixtures import (
    FINAL_OUTPUT,
    PATCH,
    USAGE,
    _resp,
    check_invariants,
    decode_bytes,
    encode_events,
    sse,
    upstream_events,
)

# ------------------------------------------------------------------------------------------
# decoder
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("chunk", [0, 7])
def test_decoder_builds_nodes_usage_and_finish(chunk):
    events = decode_bytes(sse(upstream_events()), chunk=chunk)
    check_invariants(events)
    assert (
        isinstance(events[0], ev.ResponseStart) and events[0].id == "resp_up" and events[0].model == "gpt-5"
    )
    done = events[-1]
    assert isinstance(done, ev.ResponseDone) and done.finish_reason == "tool_calls"
    out = done.output
    assert [type(n) for n in out] == [ReasoningNode, TextNode, ToolCallNode, ToolCallNode, ToolCallNode]
    assert out[0].summary == "Plan the work" and out[0].encrypted == "gAAAAenc" and out[0].id == "rs_1"
    assert out[1].content == "Hello world" and out[1].role == "assistant"
    assert [(c.call_id, c.name, c.arguments, c.tool_type) for c in out[2:]] == [
        ("call_1", "get_weather", '{"city":"Paris"}', "function"),
        ("call_2", "get_time", '{"tz":"CET"}', "function"),
        ("call_3", "apply_patch", PATCH, "custom"),
    ]
    assert (done.usage.input_tokens, done.usage.cache_read_tokens, done.usage.reasoning_tokens) == (
        120,
        100,
        16,
    )
    deltas = "".join(
        e.delta for e in events if isinstance(e, ev.NodeDelta) and e.kind == ev.ARGUMENTS and e.index == 2
    )
    assert deltas == '{"city":"Paris"}'


def test_decoder_parses_several_json_objects_in_one_data_field():
    evs = upstream_events()
    raw = b"".join(
        b"data: " + orjson.dumps(evs[i]) + orjson.dumps(evs[i + 1]) + b"\n\n"
        for i in range(0, len(evs) - 1, 2)
    )
    raw += b"data: " + orjson.dumps(evs[-1]) + b"\n\n"
    events = decode_bytes(raw)
    check_invariants(events)
    assert isinstance(events[-1], ev.ResponseDone) and len(events[-1].output) == 5


def test_decoder_completion_only_fallback():
    raw = sse(
        [
            {"type": "response.created", "response": _resp("in_progress")},
            {"type": "response.completed", "response": _resp("completed", FINAL_OUTPUT, USAGE)},
        ]
    )
    events = decode_bytes(raw)
    check_invariants(events)
    out = events[-1].output
    assert [type(n) for n in out] == [ReasoningNode, TextNode, ToolCallNode, ToolCallNode, ToolCallNode]
    assert out[1].content == "Hello world" and out[4].arguments == PATCH


def test_decoder_does_not_duplicate_streamed_classes_on_completion():
    evs = upstream_events()
    # Drop every output_item.done so the terminal object is the only source of the final items.
    evs = [e for e in evs if e["type"] != "response.output_item.done"]
    events = decode_bytes(sse(evs))
    check_invariants(events)
    out = events[-1].output
    assert len(out) == 5 and out[1].content == "Hello world" and out[0].encrypted == "gAAAAenc"


def test_decoder_incomplete_keeps_status():
    resp = _resp("incomplete", [FINAL_OUTPUT[1]], USAGE)
    resp["incomplete_details"] = {"reason": "max_output_tokens"}
    events = decode_bytes(
        sse(
            [
                {"type": "response.created", "response": _resp("in_progress")},
                {"type": "response.incomplete", "response": resp},
            ]
        )
    )
    assert events[-1].finish_reason == "length"
    raw = encode_events(events)
    parsed = check_responses_stream(raw)
    assert parsed[-1]["type"] == "response.incomplete"
    assert parsed[-1]["response"]["incomplete_details"] == {"reason": "max_output_tokens"}


def test_decoder_failed_and_error_events_are_stream_errors():
    failed = _resp("failed")
    failed["error"] = {"code": "server_error", "message": "boom"}
    events = decode_bytes(
        sse(
            [
                {"type": "response.created", "response": _resp("in_progress")},
                {"type": "response.failed", "response": failed},
                {
                    "type": "response.output_item.added",
                    "output_index": 0,
                    "item": {"type": "message", "id": "m", "role": "assistant", "content": []},
                },
            ]
        )
    )
    check_invariants(events)
    assert isinstance(events[-1], ev.StreamError) and events[-1].code == "server_error"
    events = decode_bytes(
        sse(
            [
                {
                    "type": "error",
                    "code": "rate_limit_exceeded",
                    "message": "slow down",
                    "param": None,
                    "sequence_number": 1,
                }
            ]
        )
    )
    assert isinstance(events[-1], ev.StreamError) and events[-1].code == "rate_limit_exceeded"


@pytest.mark.parametrize("tail", [b"data: [DONE]\n\n", b""])
def test_decoder_eof_or_done_without_terminal_is_an_error(tail):
    evs = upstream_events()[:12]
    events = decode_bytes(sse(evs) + tail)
    check_invariants([e for e in events if not isinstance(e, ev.ResponseStart)])
    assert isinstance(events[-1], ev.StreamError) and events[-1].code == "upstream_stream_incomplete"


def test_decoder_garbage_is_an_error():
    events = decode_bytes(b"data: {not json\n\n")
    assert isinstance(events[-1], ev.StreamError) and events[-1].code == "invalid_upstream_response"


# ------------------------------------------------------------------------------------------
# encoder
# ------------------------------------------------------------------------------------------


def test_same_protocol_pipeline_passes_the_lifecycle_checker():
    raw = encode_events(decode_bytes(sse(upstream_events())))
    parsed = check_responses_stream(raw)
    items = [e["item"] for e in parsed if e["type"] == "response.output_item.done"]
    assert [i["id"] for i in items] == ["rs_1", "msg_1", "fc_1", "fc_2", "ctc_1"]
    assert items[0]["encrypted_content"] == "gAAAAenc"
    assert items[0]["summary"] == [{"type": "summary_text", "text": "Plan the work"}]
    assert items[1]["content"][0]["text"] == "Hello world"
    assert items[4] == {
        "id": "ctc_1",
        "type": "custom_tool_call",
        "call_id": "call_3",
        "name": "apply_patch",
        "input": PATCH,
    }
    completed = parsed[-1]["response"]
    assert completed["status"] == "completed" and completed["model"] == "alias"
    assert completed["id"] == "resp_up" and completed["service_tier"] == "auto"
    assert completed["output"] == items
    assert completed["usage"] == USAGE
    # no data: [DONE] after the terminal event, like OpenAI's Responses API (issue 19)
    assert raw.endswith(b'response.completed","sequence_number":%d}\n\n' % len(parsed))
    assert b"[DONE]" not in raw


def test_cross_protocol_stream_with_interleaved_nodes():
    """A Chat-style upstream: deltas of several nodes interleave and every NodeDone comes last."""
    nodes = [
        ReasoningNode(content="raw thoughts"),
        TextNode(role="assistant", content="Hi!"),
        ToolCallNode(call_id="call_a", name="f", arguments='{"a":1}'),
        ToolCallNode(call_id="call_b", name="g", arguments="{}"),
        ToolCallNode(call_id="call_c", name="apply_patch", arguments=PATCH, tool_type="custom"),
    ]
    events: list[ev.Event] = [ev.ResponseStart(id="chatcmpl-9", model="x")]
    events += [
        ev.NodeStart(index=0, node=ReasoningNode()),
        ev.NodeDelta(index=0, kind=ev.REASONING_CONTENT, delta="raw "),
        ev.NodeStart(index=1, node=TextNode(role="assistant")),
        ev.NodeDelta(index=1, kind=ev.TEXT, delta="Hi"),
        ev.NodeDelta(index=0, kind=ev.REASONING_CONTENT, delta="thoughts"),
        ev.NodeDelta(index=1, kind=ev.TEXT, delta="!"),
        ev.NodeStart(index=2, node=ToolCallNode(call_id="call_a", name="f")),
        ev.NodeStart(index=3, node=ToolCallNode(call_id="call_b", name="g")),
        ev.NodeDelta(index=2, kind=ev.ARGUMENTS, delta='{"a":'),
        ev.NodeDelta(index=3, kind=ev.ARGUMENTS, delta="{}"),
        ev.NodeDelta(index=2, kind=ev.ARGUMENTS, delta="1}"),
        ev.NodeStart(index=4, node=ToolCallNode(call_id="call_c", name="apply_patch", tool_type="custom")),
        ev.NodeDelta(index=4, kind=ev.ARGUMENTS, delta=PATCH),
    ]
    events += [ev.NodeDone(index=i, node=n) for i, n in enumerate(nodes)]
    events.append(
        ev.ResponseDone(
            output=nodes, finish_reason="tool_calls", usage=Usage(input_tokens=3, output_tokens=4)
        )
    )
    parsed = check_responses_stream(encode_events(events, source="chat_completion"))
    completed = parsed[-1]["response"]
    assert completed["id"].startswith("resp_")
    out = completed["output"]
    assert [i["type"] for i in out] == [
        "reasoning",
        "message",
        "function_call",
        "function_call",
        "custom_tool_call",
    ]
    assert out[0]["content"] == [{"type": "reasoning_text", "text": "raw thoughts"}]
    assert [i["id"][:3] for i in out] == ["rs_", "msg", "fc_", "fc_", "ctc"]
    assert out[4]["input"] == PATCH and out[2]["arguments"] == '{"a":1}'
    types = [e["type"] for e in parsed]
    assert "response.custom_tool_call_input.done" in types and "response.reasoning_text.delta" in types


def test_empty_reasoning_and_text_nodes_emit_nothing():
    nodes = [ReasoningNode(), TextNode(role="assistant", content=""), TextNode(role="assistant", content="x")]
    events: list[ev.Event] = [ev.ResponseStart(id="r", model="m")]
    for i, n in enumerate(nodes):
        events += [
            ev.NodeStart(index=i, node=type(n)(role="assistant") if isinstance(n, TextNode) else n),
            ev.NodeDone(index=i, node=n),
        ]
    events.append(ev.ResponseDone(output=nodes, finish_reason="stop"))
    parsed = check_responses_stream(encode_events(events, source="messages"))
    added = [e for e in parsed if e["type"] == "response.output_item.added"]
    assert len(added) == 1 and added[0]["output_index"] == 0 and added[0]["item"]["type"] == "message"


def test_encrypted_only_reasoning_is_emitted_at_done():
    node = ReasoningNode(encrypted="opaque")
    events = [
        ev.ResponseStart(id="r", model="m"),
        ev.NodeStart(index=0, node=ReasoningNode()),
        ev.NodeDelta(index=0, kind=ev.REASONING_ENCRYPTED, delta="opaque"),
        ev.NodeDone(index=0, node=node),
        ev.ResponseDone(output=[node], finish_reason="stop"),
    ]
    parsed = check_responses_stream(encode_events(events, source="messages"))
    item = next(e["item"] for e in parsed if e["type"] == "response.output_item.done")
    assert item["encrypted_content"] == "opaque" and item["summary"] == []


def test_phase_change_splits_message_items_in_streams():
    a = TextNode(role="assistant", content="let me look", phase="commentary")
    b = TextNode(role="assistant", content="answer", phase="final_answer")
    events = [ev.ResponseStart(id="r", model="m")]
    for i, n in enumerate([a, b]):
        events += [
            ev.NodeStart(index=i, node=TextNode(role="assistant", phase=n.phase)),
            ev.NodeDelta(index=i, kind=ev.TEXT, delta=n.content),
            ev.NodeDone(index=i, node=n),
        ]
    events.append(ev.ResponseDone(output=[a, b], finish_reason="stop"))
    parsed = check_responses_stream(encode_events(events, source="chat_completion"))
    items = parsed[-1]["response"]["output"]
    assert [(i["phase"], i["content"][0]["text"]) for i in items] == [
        ("commentary", "let me look"),
        ("final_answer", "answer"),
    ]


def test_refusal_and_text_share_one_message_item():
    t, r = TextNode(role="assistant", content="I can't"), RefusalNode(content="refused")
    events = [
        ev.ResponseStart(id="r", model="m"),
        ev.NodeStart(index=0, node=TextNode(role="assistant")),
        ev.NodeDelta(index=0, kind=ev.TEXT, delta="I can't"),
        ev.NodeStart(index=1, node=RefusalNode()),
        ev.NodeDelta(index=1, kind=ev.REFUSAL, delta="refused"),
        ev.NodeDone(index=0, node=t),
        ev.NodeDone(index=1, node=r),
        ev.ResponseDone(output=[t, r], finish_reason="stop"),
    ]
    parsed = check_responses_stream(encode_events(events, source="chat_completion"))
    items = parsed[-1]["response"]["output"]
    assert len(items) == 1 and [p["type"] for p in items[0]["content"]] == ["output_text", "refusal"]


def test_buffered_synthetic_stream_from_response_done_only():
    nodes = [
        ReasoningNode(summary="s"),
        TextNode(role="assistant", content="text"),
        ToolCallNode(call_id="c1", name="f", arguments="{}"),
        ToolCallNode(call_id="c2", name="p", arguments=PATCH, tool_type="custom"),
    ]
    events = [ev.ResponseStart(id="r", model="m"), ev.ResponseDone(output=nodes, finish_reason="tool_calls")]
    parsed = check_responses_stream(encode_events(events, source="messages"))
    assert [i["type"] for i in parsed[-1]["response"]["output"]] == [
        "reasoning",
        "message",
        "function_call",
        "custom_tool_call",
    ]


def test_response_done_does_not_duplicate_streamed_items():
    text = TextNode(role="assistant", content="hello")
    call = ToolCallNode(call_id="c1", name="f", arguments="{}")
    events = [
        ev.ResponseStart(id="r", model="m"),
        ev.NodeStart(index=0, node=TextNode(role="assistant")),
        ev.NodeDelta(index=0, kind=ev.TEXT, delta="hello"),
        ev.NodeDone(index=0, node=text),
        ev.NodeStart(index=1, node=ToolCallNode(call_id="c1", name="f")),
        ev.NodeDone(index=1, node=call),
        # the authoritative output has the same nodes plus one that never streamed
        ev.ResponseDone(
            output=[
                TextNode(role="assistant", content="hello"),
                call,
                TextNode(role="assistant", content="late"),
            ],
            finish_reason="stop",
        ),
    ]
    parsed = check_responses_stream(encode_events(events, source="chat_completion"))
    out = parsed[-1]["response"]["output"]
    assert [(i["type"], (i.get("content") or [{}])[0].get("text")) for i in out] == [
        ("message", "hello"),
        ("function_call", None),
        ("message", "late"),
    ]


def test_pre_stream_error_sequence():
    enc = responses.StreamEncoder(EncodeContext(model="m", source_protocol="chat_completion"))
    raw = enc.error(502, "upstream_error", "All upstream attempts failed for model: m")
    parsed = check_responses_stream(raw)
    assert parsed[0] == {
        "type": "error",
        "sequence_number": 1,
        "code": "upstream_error",
        "message": "All upstream attempts failed for model: m",
        "param": None,
    }
    assert parsed[1]["response"]["status"] == "failed"
    assert parsed[1]["response"]["error"] == {
        "code": "upstream_error",
        "message": "All upstream attempts failed for model: m",
    }
    assert enc.close() == b"" and enc.encode(ev.ResponseStart(id="x", model="y")) == b""


def test_mid_stream_error_closes_items_then_fails():
    events = [
        ev.ResponseStart(id="r", model="m"),
        ev.NodeStart(index=0, node=TextNode(role="assistant")),
        ev.NodeDelta(index=0, kind=ev.TEXT, delta="par"),
        ev.StreamError(message="upstream reset", code="upstream_idle_timeout"),
    ]
    raw = encode_events(events, source="chat_completion")
    parsed = check_responses_stream(raw)
    failed = parsed[-1]
    assert failed["type"] == "response.failed"
    assert failed["response"]["error"] == {"code": "upstream_idle_timeout", "message": "upstream reset"}
    assert failed["response"]["output"][0]["status"] == "incomplete"
    assert failed["response"]["output"][0]["content"][0]["text"] == "par"


def test_close_without_terminal_is_a_failure():
    enc = responses.StreamEncoder(EncodeContext(model="m", source_protocol="responses"))
    raw = enc.encode(ev.ResponseStart(id="resp_1", model="m"))
    raw += enc.encode(ev.NodeStart(index=0, node=ToolCallNode(call_id="c", name="f")))
    raw += enc.encode(ev.NodeDelta(index=0, kind=ev.ARGUMENTS, delta="{"))
    raw += enc.close()
    parsed = check_responses_stream(raw)
    assert parsed[-1]["type"] == "response.failed"
    assert parsed[-1]["response"]["error"]["code"] == "upstream_stream_incomplete"
    assert enc.close() == b""


def test_close_before_anything_is_a_pre_stream_failure():
    enc = responses.StreamEncoder(EncodeContext(model="m"))
    parsed = check_responses_stream(enc.close())
    assert [e["type"] for e in parsed] == ["error", "response.failed"]


def test_keepalive_is_a_comment_without_sequence_number():
    enc = responses.StreamEncoder(EncodeContext(model="m"))
    assert enc.keepalive().startswith(b":")
    raw = enc.keepalive() + enc.encode(ev.ResponseStart(id="r", model="m")) + enc.keepalive()
    raw += enc.encode(ev.ResponseDone(output=[], finish_reason="stop"))
    parsed = check_responses_stream(raw)
    assert [e["sequence_number"] for e in parsed] == [1, 2, 3]


def test_encoder_owns_coordinates_regardless_of_urp_indices():
    """URP indices may be sparse or reordered after transforms; wire indices stay contiguous."""
    n = TextNode(role="assistant", content="a")
    events = [
        ev.ResponseStart(id="r", model="m"),
        ev.NodeStart(index=7, node=ReasoningNode()),
        ev.NodeDone(index=7, node=ReasoningNode()),
        ev.NodeStart(index=3, node=TextNode(role="assistant")),
        ev.NodeDelta(index=3, kind=ev.TEXT, delta="a"),
        ev.NodeDone(index=3, node=n),
        ev.ResponseDone(output=[n], finish_reason="stop"),
    ]
    parsed = check_responses_stream(encode_events(events, source="chat_completion"))
    assert {e["output_index"] for e in parsed if "output_index" in e} == {0}


def test_checker_rejects_broken_streams():
    good = encode_events(decode_bytes(sse(upstream_events())))
    frames = parse_frames(good)
    # drop one output_item.done
    broken = b"".join(
        (b"event: " + n.encode() + b"\n" if n else b"") + b"data: " + d.encode() + b"\n\n"
        for n, d in frames
        if '"response.output_item.done"' not in d or '"output_index":2' not in d
    )
    with pytest.raises(AssertionError):
        check_responses_stream(broken)
    with pytest.raises(AssertionError):
        check_responses_stream(good + b"data: [DONE]\n\n")  # the real API sends no [DONE]
    with pytest.raises(AssertionError):
        check_responses_stream(good.replace(b'"sequence_number":5', b'"sequence_number":6', 1))


def test_same_protocol_native_items_and_their_events_are_replayed():
    ws_added = {"id": "ws_1", "type": "web_search_call", "status": "in_progress"}
    ws_done = {
        "id": "ws_1",
        "type": "web_search_call",
        "status": "completed",
        "action": {"type": "search", "query": "paris weather"},
    }
    msg = {
        "id": "msg_1",
        "type": "message",
        "status": "completed",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "Sunny", "annotations": []}],
    }
    upstream = [
        {"type": "response.created", "response": _resp("in_progress")},
        {"type": "response.output_item.added", "output_index": 0, "item": ws_added},
        {"type": "response.web_search_call.in_progress", "output_index": 0, "item_id": "ws_1"},
        {"type": "response.web_search_call.searching", "output_index": 0, "item_id": "ws_1"},
        {"type": "response.output_item.done", "output_index": 0, "item": ws_done},
        {"type": "response.web_search_call.completed", "output_index": 0, "item_id": "ws_1"},  # after done
        {"type": "response.output_item.added", "output_index": 1, "item": {**msg, "content": []}},
        {
            "type": "response.output_text.delta",
            "output_index": 1,
            "item_id": "msg_1",
            "content_index": 0,
            "delta": "Sunny",
        },
        {"type": "response.output_item.done", "output_index": 1, "item": msg},
        {"type": "response.completed", "response": _resp("completed", [ws_done, msg])},
    ]
    parsed = check_responses_stream(encode_events(decode_bytes(sse(upstream))))
    types = [e["type"] for e in parsed]
    assert "response.web_search_call.searching" in types
    assert "response.web_search_call.completed" not in types  # its item was already closed
    out = parsed[-1]["response"]["output"]
    assert out[0] == ws_done and out[1]["content"][0]["text"] == "Sunny"


def test_foreign_provider_items_are_not_streamed_to_responses_clients():
    from gateway.urp.nodes import ProviderItemNode

    node = ProviderItemNode(
        origin_protocol="messages", item_type="server_tool_use", body={"type": "server_tool_use"}
    )
    text = TextNode(role="assistant", content="ok")
    events = [
        ev.ResponseStart(id="r", model="m"),
        ev.NodeStart(index=0, node=node),
        ev.NodeDone(index=0, node=node),
        ev.NodeStart(index=1, node=TextNode(role="assistant")),
        ev.NodeDelta(index=1, kind=ev.TEXT, delta="ok"),
        ev.NodeDone(index=1, node=text),
        ev.ResponseDone(output=[node, text], finish_reason="stop"),
    ]
    parsed = check_responses_stream(encode_events(events, source="messages"))
    assert [i["type"] for i in parsed[-1]["response"]["output"]] == ["message"]


def _two_part_reasoning_stream() -> list[dict]:
    rs_done = {
        "id": "rs_9",
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": "**One**"}, {"type": "summary_text", "text": "**Two**"}],
    }
    base = {"item_id": "rs_9", "output_index": 0}
    return [
        {"type": "response.created", "response": _resp("in_progress")},
        {"type": "response.output_item.added", "output_index": 0, "item": {**rs_done, "summary": []}},
        {
            "type": "response.reasoning_summary_part.added",
            **base,
            "summary_index": 0,
            "part": {"type": "summary_text", "text": ""},
        },
        {"type": "response.reasoning_summary_text.delta", **base, "summary_index": 0, "delta": "**One**"},
        {
            "type": "response.reasoning_summary_part.done",
            **base,
            "summary_index": 0,
            "part": {"type": "summary_text", "text": "**One**"},
        },
        {
            "type": "response.reasoning_summary_part.added",
            **base,
            "summary_index": 1,
            "part": {"type": "summary_text", "text": ""},
        },
        {"type": "response.reasoning_summary_text.delta", **base, "summary_index": 1, "delta": "**Two**"},
        {"type": "response.output_item.done", "output_index": 0, "item": rs_done},
        {"type": "response.completed", "response": _resp("completed", [rs_done])},
    ]


def test_reasoning_summary_parts_survive_same_protocol_and_join_for_others():
    events = decode_bytes(sse(_two_part_reasoning_stream()))
    node = events[-1].output[0]
    assert node.summary == "**One**\n\n**Two**"  # what Chat/Messages clients see
    parsed = check_responses_stream(encode_events(events))
    deltas = [
        (e["summary_index"], e["delta"])
        for e in parsed
        if e["type"] == "response.reasoning_summary_text.delta"
    ]
    assert deltas == [(0, "**One**"), (1, "**Two**")]
    assert parsed[-1]["response"]["output"][0]["summary"] == [
        {"type": "summary_text", "text": "**One**"},
        {"type": "summary_text", "text": "**Two**"},
    ]
    # buffered (ResponseDone only) same-protocol stream restores the parts too
    parsed = check_responses_stream(encode_events([events[0], events[-1]]))
    assert len(parsed[-1]["response"]["output"][0]["summary"]) == 2
    # a foreign summary (no part markers) stays one part, blank lines and all
    foreign = ReasoningNode(summary="**One**\n\n**Two**")
    parsed = check_responses_stream(
        encode_events(
            [
                ev.ResponseStart(id="r", model="m"),
                ev.NodeStart(index=0, node=ReasoningNode()),
                ev.NodeDelta(index=0, kind=ev.REASONING_SUMMARY, delta=foreign.summary),
                ev.NodeDone(index=0, node=foreign),
                ev.ResponseDone(output=[foreign], finish_reason="stop"),
            ],
            source="messages",
        )
    )
    assert parsed[-1]["response"]["output"][0]["summary"] == [
        {"type": "summary_text", "text": "**One**\n\n**Two**"}
    ]


def test_image_generation_call_becomes_an_image_node_and_replays_once():
    from gateway.urp.nodes import ImageNode

    added = {"id": "ig_1", "type": "image_generation_call", "status": "in_progress"}
    done = {
        "id": "ig_1",
        "type": "image_generation_call",
        "status": "completed",
        "result": "iVBORw0K",
        "output_format": "webp",
        "revised_prompt": "a cat",
    }
    upstream = [
        {"type": "response.created", "response": _resp("in_progress")},
        {"type": "response.output_item.added", "output_index": 0, "item": added},
        {
            "type": "response.image_generation_call.partial_image",
            "output_index": 0,
            "item_id": "ig_1",
            "partial_image_index": 0,
            "partial_image_b64": "AAAA",
        },
        {"type": "response.output_item.done", "output_index": 0, "item": done},
        {"type": "response.completed", "response": _resp("completed", [done])},
    ]
    events = decode_bytes(sse(upstream))
    check_invariants(events)
    image = events[-1].output[0]
    assert isinstance(image, ImageNode) and image.source.data == "iVBORw0K"
    assert image.source.media_type == "image/webp"
    parsed = check_responses_stream(encode_events(events))
    assert parsed[-1]["response"]["output"] == [done]
    parsed = check_responses_stream(encode_events(events, source="gemini"))
    out = parsed[-1]["response"]["output"]
    assert len(out) == 1 and out[0]["type"] == "image_generation_call" and out[0]["result"] == "iVBORw0K"


def test_decoder_fills_lost_deltas_from_done_snapshots():
    evs = [
        e
        for e in upstream_events()
        if not (e["type"] == "response.output_text.delta" and e["delta"] == " world")
    ]
    events = decode_bytes(sse(evs))
    check_invariants(events)
    text = "".join(e.delta for e in events if isinstance(e, ev.NodeDelta) and e.kind == ev.TEXT)
    assert text == "Hello world" and events[-1].output[1].content == "Hello world"


def test_include_encrypted_option():
    from gateway.urp import Request

    ctx = EncodeContext(
        model="m", source_protocol="chat_completion", options={"responses_include_encrypted": True}
    )
    out = responses.encode_request(Request(model="x", input=[TextNode(role="user", content="q")]), ctx)
    assert out["include"] == ["reasoning.encrypted_content"]
    assert "include" not in responses.encode_request(Request(model="x"), EncodeContext(model="m"))


# -- fuzz regressions (tests/fuzz) ----------------------------------------------------------------


def test_non_string_event_types_and_deep_events_do_not_crash_the_decoder():
    """A payload whose ``type`` is an object used to crash the terminal lookup; an event nested
    deeper than we could write back (or deeper than orjson reads, which sent it to the stdlib
    parser's recursion) is a stream error."""
    dec = responses.StreamDecoder()
    assert all(isinstance(e, ev.Event.__args__) for e in dec.feed("response.created", '{"type": ["x"]}'))
    assert not dec.finished
    for data in (
        '{"type":"response.output_text.delta","delta":' + "[" * 300 + "]" * 300 + "}",
        "[" * 5000 + "]" * 5000,
    ):
        dec = responses.StreamDecoder()
        out = dec.feed("response.output_text.delta", data)
        assert dec.finished and isinstance(out[-1], ev.StreamError)


def test_encoder_ignores_non_string_item_ids_from_upstream():
    """Same-protocol replays and completion-only items carry upstream ids verbatim; an object
    there crashed the encoder's id lookups."""
    from gateway.urp import ProviderItemNode

    enc = responses.StreamEncoder(EncodeContext(model="alias", source_protocol="responses"))
    out = enc.encode(ev.ResponseStart(id="resp_1", model="up"))
    out += enc.encode(
        ev.ProviderControl(
            protocol="responses",
            event_name="response.web_search_call.searching",
            data={"item_id": {"a": 1}, "output_index": 0},
        )
    )
    item = ProviderItemNode(
        origin_protocol="responses",
        item_type="web_search_call",
        body={"type": "web_search_call", "id": {"x": 1}},
    )
    out += enc.encode(ev.ResponseDone(output=[item], finish_reason="stop"))
    out += enc.close()
    assert b"response.completed" in out
    assert all(orjson.loads(d) is not None for _, d in parse_frames(out) if d != "[DONE]")
