"""reasoning_inject_content_field: Chat clients get reasoning_content; the mark never leaks."""

import orjson

from gateway.protocols import codec
from gateway.protocols.base import EncodeContext
from gateway.urp import ReasoningNode, Response, TextNode
from gateway.urp import events as ev
from gateway.urp.presentation import INJECT_REASONING_CONTENT
from tests.transforms.streams import run_stream, run_whole, stream_of
from transforms.registry import canonical_id, registry

TYPE_ID = "reasoning_inject_content_field"


def chat_message(nodes):
    resp = Response(id="r", model="m", output=run_whole(registry()[TYPE_ID](), nodes), finish_reason="stop")
    return codec("chat_completion").encode_response(
        resp, EncodeContext(model="m", source_protocol="responses")
    )["choices"][0]["message"]


def test_value_content_then_summary_never_encrypted():
    assert (
        chat_message([ReasoningNode(content="plain_resp"), TextNode(role="assistant", content="Hi")])[
            "reasoning_content"
        ]
        == "plain_resp"
    )
    assert (
        chat_message([ReasoningNode(summary="summary_fallback")])["reasoning_content"] == "summary_fallback"
    )
    msg = chat_message([ReasoningNode(encrypted="only")])
    assert "reasoning_content" not in msg
    assert msg["reasoning_details"][0]["type"] == "reasoning.encrypted"


def test_normal_fields_stay():
    msg = chat_message([ReasoningNode(content="c", summary="s")])
    assert msg["reasoning_content"] == "c"
    assert [d["type"] for d in msg["reasoning_details"]] == ["reasoning.text", "reasoning.summary"]


def test_other_protocols_ignore_the_mark():
    resp = Response(id="r", model="m", output=run_whole(registry()[TYPE_ID](), [ReasoningNode(content="c")]))
    for protocol in ("responses", "messages"):
        body = codec(protocol).encode_response(
            resp, EncodeContext(model="m", source_protocol="chat_completion")
        )
        assert b"reasoning_content" not in orjson.dumps(body) and b"_gw_" not in orjson.dumps(body)


def test_stream_chat_chunks_carry_reasoning_content():
    out = run_stream(
        registry()[TYPE_ID](),
        stream_of([ReasoningNode(content="abc"), TextNode(role="assistant", content="x")], cuts=[1]),
    )
    assert [e.extra.get(INJECT_REASONING_CONTENT) for e in out if isinstance(e, ev.NodeDelta)] == [
        True,
        True,
        None,
    ]
    enc = codec("chat_completion").StreamEncoder(EncodeContext(model="m", source_protocol="responses"))
    raw = b"".join(enc.encode(e) for e in out)
    chunks = [orjson.loads(line[6:]) for line in raw.split(b"\n") if line.startswith(b"data: {")]
    streamed = "".join(c["choices"][0]["delta"].get("reasoning_content", "") for c in chunks if c["choices"])
    assert streamed == "abc"
    assert b"_gw_" not in raw


def test_alias():
    assert canonical_id("reasoning_content_delta") == TYPE_ID
