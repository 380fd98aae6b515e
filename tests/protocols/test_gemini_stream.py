"""Gemini ``streamGenerateContent?alt=sse`` decoding from realistic chunks, and the events it
produces driving the Messages client encoder end to end."""

from __future__ import annotations

import orjson

from gateway.protocols import gemini, messages
from gateway.protocols.base import EncodeContext
from gateway.protocols.sse import SSEParser
from gateway.urp import NodeDelta, NodeDone, NodeStart, ResponseDone, ResponseStart, StreamError
from gateway.urp import events as ev
from gateway.urp.accumulate import Accumulator
from tests.protocols.check_messages_stream import check_messages_stream

CHUNKS = [
    {
        "candidates": [
            {
                "content": {"parts": [{"text": "**Planning** I need ", "thought": True}], "role": "model"},
                "index": 0,
            }
        ],
        "usageMetadata": {"promptTokenCount": 40, "totalTokenCount": 40},
        "modelVersion": "gemini-2.5-flash",
        "responseId": "r-123",
    },
    {
        "candidates": [
            {"content": {"parts": [{"text": "the weather.", "thought": True}], "role": "model"}, "index": 0}
        ],
        "modelVersion": "gemini-2.5-flash",
        "responseId": "r-123",
    },
    {
        "candidates": [{"content": {"parts": [{"text": "Checking"}], "role": "model"}, "index": 0}],
        "modelVersion": "gemini-2.5-flash",
        "responseId": "r-123",
    },
    {
        "candidates": [{"content": {"parts": [{"text": " now."}], "role": "model"}, "index": 0}],
        "modelVersion": "gemini-2.5-flash",
        "responseId": "r-123",
    },
    {
        "candidates": [
            {
                "content": {
                    "parts": [
                        {
                            "functionCall": {"name": "get_weather", "args": {"city": "Paris"}},
                            "thoughtSignature": "CiQB0e2Kb",
                        },
                        {"functionCall": {"name": "get_time", "args": {"tz": "UTC"}}},
                    ],
                    "role": "model",
                },
                "finishReason": "STOP",
                "index": 0,
            }
        ],
        "usageMetadata": {
            "promptTokenCount": 40,
            "candidatesTokenCount": 25,
            "thoughtsTokenCount": 12,
            "totalTokenCount": 77,
            "cachedContentTokenCount": 8,
        },
        "modelVersion": "gemini-2.5-flash",
        "responseId": "r-123",
    },
]


def sse_bytes(chunks: list) -> bytes:
    return b"".join(b"data: " + orjson.dumps(c) + b"\r\n\r\n" for c in chunks)


def decode(raw: bytes) -> list:
    decoder = gemini.StreamDecoder()
    parser = SSEParser()
    out: list = []
    for name, data in list(parser.feed(raw)) + list(parser.close()):
        out.extend(decoder.feed(name, data))
    out.extend(decoder.close())
    return out


def test_stream_decode_realistic_chunks():
    events = decode(sse_bytes(CHUNKS))
    assert isinstance(events[0], ResponseStart) and events[0].id == "r-123"
    starts = [e for e in events if isinstance(e, NodeStart)]
    dones = [e for e in events if isinstance(e, NodeDone)]
    assert [e.index for e in starts] == [0, 1, 2, 3] == [e.index for e in dones]
    summary = "".join(e.delta for e in events if isinstance(e, NodeDelta) and e.kind == ev.REASONING_SUMMARY)
    assert summary == "**Planning** I need the weather."
    text = "".join(e.delta for e in events if isinstance(e, NodeDelta) and e.kind == ev.TEXT)
    assert text == "Checking now."
    done = events[-1]
    assert isinstance(done, ResponseDone) and done.finish_reason == "tool_calls"
    assert sum(isinstance(e, ResponseDone | StreamError) for e in events) == 1
    call1, call2 = done.output[2], done.output[3]
    assert orjson.loads(call1.arguments) == {"city": "Paris"} and orjson.loads(call2.arguments) == {
        "tz": "UTC"
    }
    assert call1.call_id != call2.call_id and call1.extra[gemini.SIGNATURE] == "CiQB0e2Kb"
    assert (done.usage.input_tokens, done.usage.output_tokens, done.usage.cache_read_tokens) == (40, 37, 8)
    # accumulating the events gives exactly the authoritative output
    acc = Accumulator()
    for e in events:
        acc.feed(e)
    assert [type(n) for n in acc.output()] == [type(n) for n in done.output]
    assert acc.output()[2].arguments == call1.arguments


def test_stream_ids_are_stable_between_start_and_done():
    events = decode(sse_bytes(CHUNKS))
    by_index = {
        e.index: e.node.call_id for e in events if isinstance(e, NodeStart) and e.node.type == "tool_call"
    }
    for e in events:
        if isinstance(e, NodeDone) and e.node.type == "tool_call":
            assert e.node.call_id == by_index[e.index]


def test_stream_eof_without_finish_reason_is_an_error():
    events = decode(sse_bytes(CHUNKS[:3]))
    assert isinstance(events[-1], StreamError) and events[-1].code == "upstream_stream_incomplete"
    assert not any(isinstance(e, ResponseDone) for e in events)


def test_stream_error_chunk_and_bad_json():
    events = decode(
        sse_bytes([CHUNKS[0], {"error": {"code": 503, "message": "overloaded", "status": "UNAVAILABLE"}}])
    )
    assert isinstance(events[-1], StreamError) and events[-1].status == 503
    d = gemini.StreamDecoder()
    assert isinstance(d.feed(None, "{oops")[0], StreamError) and d.finished


def test_trailing_signature_only_part_attaches_to_the_text():
    chunks = [
        {"candidates": [{"content": {"parts": [{"text": "Hello"}], "role": "model"}}]},
        {
            "candidates": [
                {
                    "content": {"parts": [{"text": "", "thoughtSignature": "SIGT"}], "role": "model"},
                    "finishReason": "STOP",
                }
            ],
            "usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": 1},
        },
    ]
    done = decode(sse_bytes(chunks))[-1]
    assert len(done.output) == 1 and done.output[0].content == "Hello"
    assert done.output[0].extra[gemini.SIGNATURE] == "SIGT"


def test_gemini_stream_through_messages_client_encoder():
    enc = messages.StreamEncoder(EncodeContext(model="claude-logical", source_protocol="gemini"))
    raw = b"".join(enc.encode(e) for e in decode(sse_bytes(CHUNKS))) + enc.close()
    events = check_messages_stream(raw)
    starts = [p["content_block"]["type"] for n, p in events if n == "content_block_start"]
    assert starts == ["thinking", "text", "tool_use", "tool_use"]
    delta = [p for n, p in events if n == "message_delta"][0]
    assert delta["delta"]["stop_reason"] == "tool_use"
    assert delta["usage"]["input_tokens"] == 32 and delta["usage"]["cache_read_input_tokens"] == 8


# -- fuzz regressions (tests/fuzz) ----------------------------------------------------------------


def test_non_list_parts_absurd_usage_and_deep_chunks_do_not_crash_the_decoder():
    """``parts`` as a number crashed the loop over it; usage counters near 2**64 overflowed the
    client encoders' sums; a chunk nested deeper than we could write back is a stream error."""
    raw = sse_bytes(
        [
            {"candidates": [{"content": {"role": "model", "parts": 5}, "index": 0}], "responseId": "r1"},
            {
                "candidates": [
                    {
                        "content": {"role": "model", "parts": [{"text": "hi"}]},
                        "index": 0,
                        "finishReason": "STOP",
                    }
                ],
                "usageMetadata": {
                    "promptTokenCount": 2**64 - 1,
                    "candidatesTokenCount": 2**64 - 1,
                    "thoughtsTokenCount": 2**64 - 1,
                    "cachedContentTokenCount": -1,
                },
            },
        ]
    )
    events = decode(raw)
    assert isinstance(events[-1], ResponseDone)
    assert events[-1].usage.input_tokens == 0 and events[-1].usage.reasoning_tokens is None
    for client in ("chat_completion", "responses", "messages"):
        from gateway.protocols import codec

        enc = codec(client).StreamEncoder(EncodeContext(model="l", source_protocol="gemini"))
        b"".join(enc.encode(e) for e in events)

    deep = gemini.StreamDecoder()
    out = deep.feed(None, '{"candidates": ' + "[" * 300 + "]" * 300 + "}")
    assert isinstance(out[-1], StreamError) and out[-1].code == "invalid_upstream_response"
