"""FrameSplitter: oversized delta frames become several frames whose strings concatenate back."""

from __future__ import annotations

import httpx
import orjson
import pytest

from gateway.protocols.sse import SSEParser
from tests.sdk_http import httpx_for
from transforms.lib.sse_frame_split import FrameSplitter, split_string

TEXT = 'Hello "world"\n' * 30 + "é✓😀\\tail"


def frame(obj: dict, event: str | None = None) -> bytes:
    head = f"event: {event}\n".encode() if event else b""
    return head + b"data: " + orjson.dumps(obj) + b"\n\n"


def parse(stream: bytes) -> list[tuple[str | None, str]]:
    return list(SSEParser().feed(stream))


def data_lines(stream: bytes) -> list[bytes]:
    return [line for line in stream.split(b"\n") if line.startswith(b"data:")]


def assert_lines_fit(stream: bytes, limit: int) -> None:
    for line in data_lines(stream):
        assert len(line) <= limit, line


def chat_chunk(delta: dict, finish=None, **extra) -> dict:
    return {
        "id": "chatcmpl_1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        **extra,
    }


# -- Chat Completions --------------------------------------------------------------------------


@pytest.mark.parametrize("limit", [180, 200, 400])
def test_chat_content_is_split_under_the_limit(limit):
    splitter = FrameSplitter("chat_completion", limit)
    out = splitter.process(frame(chat_chunk({"role": "assistant", "content": TEXT})))
    assert_lines_fit(out, limit)
    chunks = [orjson.loads(d) for _, d in parse(out)]
    assert len(chunks) > 1
    assert "".join(c["choices"][0]["delta"]["content"] for c in chunks) == TEXT
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert all("role" not in c["choices"][0]["delta"] for c in chunks[1:])
    assert all(c["id"] == "chatcmpl_1" and c["choices"][0]["finish_reason"] is None for c in chunks)


def test_chat_chunks_are_the_largest_prefix_that_fits():
    limit = 300
    out = FrameSplitter("chat_completion", limit).process(frame(chat_chunk({"content": "x" * 1000})))
    lines = data_lines(out)
    assert all(len(line) == limit for line in lines[:-1])
    assert len(lines[-1]) <= limit


def test_chat_escapes_count_and_are_never_cut():
    limit = 171  # odd: a two-byte escape cannot always fill the line exactly
    text = '"\n\\' * 200
    out = FrameSplitter("chat_completion", limit).process(frame(chat_chunk({"content": text})))
    assert_lines_fit(out, limit)
    assert "".join(orjson.loads(d)["choices"][0]["delta"]["content"] for _, d in parse(out)) == text


def test_chat_tool_arguments_keep_id_and_name_on_the_first_chunk_only():
    args = orjson.dumps({"input": TEXT}).decode()
    call = {
        "index": 0,
        "id": "call_1",
        "type": "function",
        "function": {"name": "apply_patch", "arguments": args},
    }
    out = FrameSplitter("chat_completion", 160).process(frame(chat_chunk({"tool_calls": [call]})))
    chunks = [orjson.loads(d)["choices"][0]["delta"]["tool_calls"][0] for _, d in parse(out)]
    assert "".join(c["function"]["arguments"] for c in chunks) == args
    assert chunks[0]["id"] == "call_1" and chunks[0]["function"]["name"] == "apply_patch"
    assert all(set(c) == {"index", "function"} and set(c["function"]) == {"arguments"} for c in chunks[1:])


def test_chat_reasoning_details_and_finish_and_usage_on_the_last_chunk():
    detail = {"type": "reasoning.text", "text": TEXT, "format": "unknown", "index": 0, "signature": "sig"}
    chunk = chat_chunk({"reasoning_details": [detail]}, finish="stop", usage={"prompt_tokens": 1})
    out = FrameSplitter("chat_completion", 300).process(frame(chunk))
    assert_lines_fit(out, 300)
    chunks = [orjson.loads(d) for _, d in parse(out)]
    entries = [c["choices"][0]["delta"]["reasoning_details"][0] for c in chunks]
    assert "".join(e["text"] for e in entries) == TEXT
    assert all(e["type"] == "reasoning.text" for e in entries)
    assert entries[0]["signature"] == "sig" and all("signature" not in e for e in entries[1:])
    assert entries[0]["format"] == "unknown" and all("format" not in e for e in entries[1:])
    assert all(e["index"] == 0 for e in entries)
    assert [c["choices"][0]["finish_reason"] for c in chunks][-1] == "stop"
    assert all(c["choices"][0]["finish_reason"] is None for c in chunks[:-1])
    assert "usage" in chunks[-1] and all("usage" not in c for c in chunks[:-1])


def test_small_frames_done_and_comments_pass_through_unchanged():
    splitter = FrameSplitter("chat_completion", 120)
    stream = b":heartbeat\n\n" + frame(chat_chunk({"content": "hi"})) + b"data: [DONE]\n\n"
    assert splitter.process(stream) == stream
    big = frame(chat_chunk({"role": "assistant", "content": "x" * 500, "refusal": "y" * 500}))
    assert splitter.process(big) == big  # two string-bearing deltas: not split


def test_a_character_that_cannot_fit_goes_out_alone():
    chunk = chat_chunk({"content": "ab"})
    empty = len(b"data: " + orjson.dumps(chat_chunk({"content": ""})))
    out = FrameSplitter("chat_completion", empty).process(frame(chunk))
    assert [orjson.loads(d)["choices"][0]["delta"]["content"] for _, d in parse(out)] == ["a", "b"]


def test_wrapper_larger_than_the_limit_is_emitted_unsplit():
    original = frame(chat_chunk({"content": "x" * 300}))
    assert FrameSplitter("chat_completion", 50).process(original) == original


def test_split_string_is_exact_on_multibyte_characters():
    text = "é😀a" * 50
    chunks = split_string(text, lambda k: 10, 20)
    assert "".join(chunks) == text
    assert all(len(orjson.dumps(c)) - 2 + 10 <= 20 for c in chunks)


def test_real_chat_encoder_output_is_split():
    chat = pytest.importorskip("gateway.protocols.chat")
    from gateway.protocols.base import EncodeContext
    from gateway.urp import TextNode
    from gateway.urp import events as ev

    encoder = chat.StreamEncoder(EncodeContext(model="m"))
    splitter = FrameSplitter("chat_completion", 300)
    text = TEXT * 3
    wire = b"".join(
        splitter.process(encoder.encode(e))
        for e in [
            ev.ResponseStart(id="r", model="up"),
            ev.NodeStart(index=0, node=TextNode(role="assistant")),
            ev.NodeDelta(index=0, kind=ev.TEXT, delta=text),
            ev.NodeDone(index=0, node=TextNode(role="assistant", content=text)),
            ev.ResponseDone(output=[TextNode(role="assistant", content=text)], finish_reason="stop"),
        ]
    )
    assert len(data_lines(wire)) > 5
    assert_lines_fit(wire, 300)
    content = "".join(
        orjson.loads(d)["choices"][0]["delta"].get("content") or ""
        for _, d in parse(wire)
        if d != "[DONE]" and orjson.loads(d).get("choices")
    )
    assert content == text


# -- Responses ---------------------------------------------------------------------------------


def test_responses_delta_split_renumbers_every_later_event():
    splitter = FrameSplitter("responses", 180)
    events = [
        ({"type": "response.created", "sequence_number": 1, "response": {"id": "r"}}, "response.created"),
        (
            {
                "type": "response.output_text.delta",
                "sequence_number": 2,
                "item_id": "msg_1",
                "output_index": 0,
                "content_index": 0,
                "delta": TEXT,
                "logprobs": [],
            },
            "response.output_text.delta",
        ),
        (
            {
                "type": "response.output_text.done",
                "sequence_number": 3,
                "item_id": "msg_1",
                "output_index": 0,
                "content_index": 0,
                "text": "short",
            },
            "response.output_text.done",
        ),
    ]
    out = b"".join(splitter.process(frame(obj, name)) for obj, name in events) + splitter.process(
        b"data: [DONE]\n\n"
    )
    parsed = [(name, orjson.loads(d)) for name, d in parse(out) if d != "[DONE]"]
    assert [p["sequence_number"] for _, p in parsed] == list(range(1, len(parsed) + 1))
    deltas = [p for name, p in parsed if name == "response.output_text.delta"]
    assert len(deltas) > 2 and "".join(p["delta"] for p in deltas) == TEXT
    assert all(name == p["type"] for name, p in parsed)
    assert_lines_fit(b"\n".join(line for line in data_lines(out) if b".delta" in line), 180)
    assert parsed[-1][0] == "response.output_text.done"


def test_responses_sequence_digits_growth_still_fits():
    splitter = FrameSplitter("responses", 150)
    obj = {
        "type": "response.function_call_arguments.delta",
        "sequence_number": 7,
        "item_id": "fc",
        "output_index": 0,
        "delta": "y" * 4000,
    }
    out = splitter.process(frame(obj, obj["type"]))
    parsed = [orjson.loads(d) for _, d in parse(out)]
    assert parsed[-1]["sequence_number"] >= 100
    assert_lines_fit(out, 150)
    assert "".join(p["delta"] for p in parsed) == "y" * 4000


# -- Messages ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kind", [("text_delta", "text"), ("thinking_delta", "thinking"), ("input_json_delta", "partial_json")]
)
def test_messages_content_block_delta_split(kind):
    dtype, field = kind
    obj = {"type": "content_block_delta", "index": 2, "delta": {"type": dtype, field: TEXT}}
    out = FrameSplitter("messages", 140).process(frame(obj, "content_block_delta"))
    parsed = parse(out)
    assert len(parsed) > 1 and all(name == "content_block_delta" for name, _ in parsed)
    payloads = [orjson.loads(d) for _, d in parsed]
    assert "".join(p["delta"][field] for p in payloads) == TEXT
    assert all(p["index"] == 2 and p["delta"]["type"] == dtype for p in payloads)
    assert_lines_fit(out, 140)


def test_messages_signature_is_never_split():
    """The Anthropic SDK replaces the signature with each signature_delta instead of appending."""
    obj = {
        "type": "content_block_delta",
        "index": 0,
        "delta": {"type": "signature_delta", "signature": "s" * 900},
    }
    original = frame(obj, "content_block_delta")
    assert FrameSplitter("messages", 140).process(original) == original


def test_messages_other_events_pass_through():
    obj = {"type": "message_start", "message": {"id": "m", "content": [], "x": "z" * 500}}
    original = frame(obj, "message_start")
    assert FrameSplitter("messages", 100).process(original) == original


def test_hook_wraps_only_when_a_rule_applies():
    from transforms.base import TransformContext
    from transforms.builtin.stream_split_sse_frames import StreamSplitSseFrames
    from transforms.engine import CompiledRule, wrap_stream_encoder
    from transforms.lib.sse_frame_split import SplittingEncoder

    class Enc:
        marker = "inner"

        def encode(self, event):
            return frame(
                {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": event}},
                "content_block_delta",
            )

        def keepalive(self):
            return b'event: ping\ndata: {"type":"ping"}\n\n'

        def error(self, status, code, message):
            return b""

        def close(self):
            return b""

    plain = Enc()
    ctx = TransformContext(logical_model="m", client_protocol="messages")
    assert wrap_stream_encoder([], plain, ctx) is plain
    rule = CompiledRule(1, "api_key", "response", None, StreamSplitSseFrames({"max_frame_length": 120}))
    wrapped = wrap_stream_encoder([rule], plain, ctx)
    assert isinstance(wrapped, SplittingEncoder) and wrapped.marker == "inner"
    out = wrapped.encode("z" * 500)
    assert (
        len(parse(out)) > 1 and "".join(orjson.loads(d)["delta"]["text"] for _, d in parse(out)) == "z" * 500
    )
    assert wrapped.keepalive() == plain.keepalive()


# -- real client encoders + their lifecycle checkers ---------------------------------------------


def _encoded_stream(protocol: str, limit: int) -> tuple[bytes, str, str]:
    """A reasoning + text + tool call turn through the real client encoder and a splitter."""
    from gateway.protocols import codec
    from gateway.protocols.base import EncodeContext
    from gateway.urp import ReasoningNode, TextNode, ToolCallNode, Usage
    from gateway.urp import events as ev

    text = TEXT * 4
    args = orjson.dumps({"path": "a.txt", "body": TEXT * 2}).decode()
    reasoning = ReasoningNode(summary='Thinking about "it"\n' * 20)
    call = ToolCallNode(call_id="call_1", name="write", arguments=args)
    answer = TextNode(role="assistant", content=text)
    encoder = codec(protocol).StreamEncoder(EncodeContext(model="m", source_protocol=protocol))
    splitter = FrameSplitter(protocol, limit)
    events = [
        ev.ResponseStart(id="resp_1", model="m"),
        ev.NodeStart(index=0, node=ReasoningNode()),
        ev.NodeDelta(index=0, kind=ev.REASONING_SUMMARY, delta=reasoning.summary),
        ev.NodeDone(index=0, node=reasoning),
        ev.NodeStart(index=1, node=TextNode(role="assistant")),
        ev.NodeDelta(index=1, kind=ev.TEXT, delta=text),
        ev.NodeDone(index=1, node=answer),
        ev.NodeStart(index=2, node=ToolCallNode(call_id="call_1", name="write")),
        ev.NodeDelta(index=2, kind=ev.ARGUMENTS, delta=args),
        ev.NodeDone(index=2, node=call),
        ev.ResponseDone(
            output=[reasoning, answer, call],
            finish_reason="tool_calls",
            usage=Usage(input_tokens=3, output_tokens=5),
        ),
    ]
    wire = b"".join(splitter.process(encoder.encode(e)) for e in events) + splitter.process(encoder.close())
    return wire, text, args


def test_real_responses_encoder_split_keeps_a_valid_contiguous_stream():
    from tests.protocols.check_responses_stream import check_responses_stream

    wire, text, args = _encoded_stream("responses", 300)
    payloads = check_responses_stream(wire)
    assert [p["sequence_number"] for p in payloads] == list(
        range(payloads[0]["sequence_number"], payloads[0]["sequence_number"] + len(payloads))
    )
    text_deltas = [p["delta"] for p in payloads if p["type"] == "response.output_text.delta"]
    arg_deltas = [p["delta"] for p in payloads if p["type"] == "response.function_call_arguments.delta"]
    assert len(text_deltas) > 1 and "".join(text_deltas) == text
    assert len(arg_deltas) > 1 and "".join(arg_deltas) == args
    for line in data_lines(wire):
        if b'.delta"' in line:
            assert len(line) <= 300


def test_real_messages_encoder_split_keeps_a_valid_stream():
    from tests.protocols.check_messages_stream import check_messages_stream

    wire, text, args = _encoded_stream("messages", 200)
    events = check_messages_stream(wire)
    deltas = [p["delta"] for name, p in events if name == "content_block_delta"]
    assert "".join(d.get("text", "") for d in deltas) == text
    assert orjson.loads("".join(d.get("partial_json", "") for d in deltas)) == orjson.loads(args)
    assert sum(1 for d in deltas if "text" in d) > 1
    for line in data_lines(wire):
        if b"content_block_delta" in line:
            assert len(line) <= 200


def test_real_chat_encoder_split_keeps_a_valid_stream():
    from tests.protocols.check_chat_stream import assemble, check_chat_stream

    wire, text, args = _encoded_stream("chat_completion", 300)
    chunks = check_chat_stream(wire)
    message = assemble(chunks)
    assert len(chunks) > 8
    assert message["text"] == text
    assert message["tool_calls"] == [{"id": "call_1", "type": "function", "name": "write", "arguments": args}]
    assert message["finish_reason"] == "tool_calls" and message["usage"]["completion_tokens"] == 5
    summary = "".join(d.get("summary") or d.get("text") or "" for d in message["details"])
    assert summary == 'Thinking about "it"\n' * 20
    for line in data_lines(wire):
        assert len(line) <= 300 or b'"content"' not in line


def _escaped_len(text: str) -> int:
    return len(orjson.dumps(text)) - 2


@pytest.mark.parametrize("budget", range(1, 16))
def test_split_string_chunks_are_whole_characters_and_maximal(budget):
    import random

    rng = random.Random(budget)
    alphabet = ["a", '"', "\\", "\n", "\x01", "é", "✓", "😀", "\\\\", "u", "\t", "\x7f", " "]
    for _ in range(40):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30)))
        chunks = split_string(text, lambda k: 0, budget)
        assert "".join(chunks) == text
        for i, chunk in enumerate(chunks):
            assert chunk
            size = _escaped_len(chunk)
            assert size <= budget or len(chunk) == 1  # only a lone character may overflow
            if i + 1 < len(chunks) and size <= budget:
                assert _escaped_len(chunk + chunks[i + 1][0]) > budget  # the largest prefix that fits


# -- the official SDKs fold split streams back into the original message ---------------------------


def _mock_http(payload: bytes, sdk=None) -> httpx.Client:
    hx = httpx_for(sdk) if sdk is not None else httpx  # anthropic 2.x takes httpx2

    def handler(request):
        return hx.Response(200, content=payload, headers={"content-type": "text/event-stream"})

    return hx.Client(transport=hx.MockTransport(handler))


def test_openai_sdk_rebuilds_a_split_chat_stream():
    import openai

    wire, text, args = _encoded_stream("chat_completion", 260)
    client = openai.OpenAI(
        api_key="sk-test", base_url="http://gw.test/v1", http_client=_mock_http(wire), max_retries=0
    )
    with client.chat.completions.stream(model="m", messages=[{"role": "user", "content": "hi"}]) as stream:
        final = stream.get_final_completion()
    message = final.choices[0].message
    assert message.content == text
    (call,) = message.tool_calls
    assert call.id == "call_1" and call.function.name == "write" and call.function.arguments == args


def test_anthropic_sdk_rebuilds_a_split_messages_stream():
    import anthropic

    wire, text, args = _encoded_stream("messages", 200)
    client = anthropic.Anthropic(
        api_key="sk-test", base_url="http://gw.test", http_client=_mock_http(wire, anthropic), max_retries=0
    )
    with client.messages.stream(
        model="m", max_tokens=10, messages=[{"role": "user", "content": "hi"}]
    ) as stream:
        final = stream.get_final_message()
    texts = [b.text for b in final.content if b.type == "text"]
    tools = [b for b in final.content if b.type == "tool_use"]
    assert texts == [text]
    assert len(tools) == 1 and tools[0].name == "write" and tools[0].input == orjson.loads(args)
