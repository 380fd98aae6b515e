"""reasoning_summary_to_raw_cot: Chat clients get summaries as reasoning_content."""

import orjson

from gateway.protocols import codec
from gateway.protocols.base import EncodeContext
from gateway.urp import ReasoningNode, Response
from gateway.urp import events as ev
from gateway.urp.presentation import SUMMARY_AS_CHAT_CONTENT
from tests.transforms.streams import run_stream, run_whole, stream_of
from transforms.registry import registry

TYPE_ID = "reasoning_summary_to_raw_cot"


def test_marks_only_nodes_and_deltas_with_a_summary():
    out = run_whole(
        registry()[TYPE_ID](),
        [ReasoningNode(content="full", summary="brief summary"), ReasoningNode(content="c")],
    )
    assert out[0].extra == {SUMMARY_AS_CHAT_CONTENT: True} and out[1].extra == {}
    assert (out[0].content, out[0].summary) == ("full", "brief summary")
    events = run_stream(
        registry()[TYPE_ID](),
        [
            ev.NodeDelta(index=0, kind=ev.REASONING_SUMMARY, delta="s"),
            ev.NodeDelta(index=0, kind=ev.REASONING_CONTENT, delta="c"),
        ],
    )
    assert [e.extra for e in events] == [{SUMMARY_AS_CHAT_CONTENT: True}, {}]


def test_chat_message_and_stream_show_summary_as_reasoning_content():
    nodes = [ReasoningNode(summary="brief summary", encrypted="sig")]
    resp = Response(id="r", model="m", output=run_whole(registry()[TYPE_ID](), nodes), finish_reason="stop")
    msg = codec("chat_completion").encode_response(
        resp, EncodeContext(model="m", source_protocol="messages")
    )["choices"][0]["message"]
    assert msg["reasoning_content"] == "brief summary"
    assert [d["type"] for d in msg["reasoning_details"]] == ["reasoning.encrypted"]
    enc = codec("chat_completion").StreamEncoder(EncodeContext(model="m", source_protocol="messages"))
    raw = b"".join(enc.encode(e) for e in run_stream(registry()[TYPE_ID](), stream_of(nodes, cuts=[3])))
    chunks = [orjson.loads(line[6:]) for line in raw.split(b"\n") if line.startswith(b"data: {")]
    deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
    assert "".join(d.get("reasoning_content", "") for d in deltas) == "brief summary"
    assert not [d for d in deltas for x in d.get("reasoning_details", []) if x["type"] == "reasoning.summary"]


def test_messages_client_unaffected():
    resp = Response(
        id="r",
        model="m",
        output=run_whole(registry()[TYPE_ID](), [ReasoningNode(summary="s", encrypted="sig")]),
    )
    body = codec("messages").encode_response(resp, EncodeContext(model="m", source_protocol="messages"))
    assert body["content"][0]["thinking"] == "s"
