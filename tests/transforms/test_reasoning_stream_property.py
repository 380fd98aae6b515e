"""Property: for the reasoning stream transforms, a stream and the whole response end the same,
whatever the upstream's delta splits.

Two levels. Canonical: the transformed events keep a valid lifecycle, and what
``urp.accumulate`` folds from them, every ``NodeDone.node`` and ``ResponseDone.output`` equal the
whole-response rule's output. Per client protocol: the client encoder's SSE, read back by that
protocol's own stream decoder, ends with what the client's non-stream body decodes to; for Chat
Completions the text fields concatenated over the chunks (what the SDK's accumulator builds)
equal the non-stream message's.
"""

from __future__ import annotations

from copy import deepcopy

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.protocols import codec
from gateway.protocols.base import EncodeContext
from gateway.protocols.sse import SSEParser
from gateway.urp import ReasoningNode, Response, TextNode, ToolCallNode
from gateway.urp import events as ev
from tests.transforms.streams import (
    accumulated,
    check_lifecycle,
    done_nodes,
    plain,
    run_stream,
    run_whole,
    stream_of,
    terminal,
)
from transforms.registry import registry

RULES = [
    ("reasoning_from_think_xml", {"tag": "think"}),
    ("reasoning_to_think_xml", {"tag": "think"}),
    ("reasoning_strip_output", {}),
    ("reasoning_summary_heading", {}),
    ("reasoning_summary_heading", {"derive_title": True, "max_title_chars": 8}),
    ("reasoning_content_to_summary", {}),
    ("reasoning_strip_encrypted", {}),
    ("reasoning_inject_content_field", {}),
    ("reasoning_summary_to_raw_cot", {}),
]

WORDS = st.sampled_from(
    [
        "<think>",
        "</think>",
        "<thi",
        "</",
        "<",
        "hello ",
        "world",
        ". ",
        "**",
        "Plan",
        "\n",
        "é→",
        "a<b",
        "**Title**\n",
        "x",
    ]
)
TEXT = st.lists(WORDS, min_size=1, max_size=8).map("".join)


@st.composite
def answers(draw):
    nodes = []
    if draw(st.booleans()):
        kind = draw(st.sampled_from(["content", "summary"]))
        body = draw(TEXT)
        enc = draw(st.sampled_from([None, "sig-abc"]))
        nodes.append(
            ReasoningNode(content=body, encrypted=enc)
            if kind == "content"
            else ReasoningNode(summary=body, encrypted=enc)
        )
    nodes.append(TextNode(role="assistant", content=draw(TEXT)))
    if draw(st.booleans()):
        nodes.append(ToolCallNode(call_id="call_1", name="lookup", arguments='{"q": "x"}'))
    return nodes


def view(nodes: list) -> list:
    """``plain`` with tool arguments compared as JSON (Messages re-serialises a non-stream
    ``input`` object, which is not what a reasoning rule is about)."""
    out = []
    for item in plain(nodes):
        if item[0] == "envelope_extra":  # a Chat message without content decodes with one
            continue
        if item[0] == "call":
            item = (*item[:3], orjson.loads(item[3] or "{}"))
        elif item[0] == "reasoning":  # an empty Messages signature is no signature
            item = (*item[:3], item[3] or None)
        out.append(item)
    return out


# ``reasoning`` is left out: the Chat codec adds summaries to it only in non-stream bodies (a codec
# property, independent of these rules).
CHAT_FIELDS = ("content", "reasoning_content")


def chat_whole_fields(nodes: list) -> dict:
    """The text fields of the non-stream Chat message (read as an SDK would: raw JSON). The Chat
    codec joins a message's text nodes with a blank line only in non-stream bodies, a codec
    property, not a rule's: blank lines are not compared."""
    resp = Response(id="resp_1", model="m", output=deepcopy(nodes), finish_reason="stop")
    msg = codec("chat_completion").encode_response(
        resp, EncodeContext(model="m", source_protocol="responses")
    )["choices"][0]["message"]
    return {k: (msg.get(k) or "").replace("\n\n", "") for k in CHAT_FIELDS}


def chat_stream_fields(events: list[ev.Event]) -> dict:
    """The same fields concatenated over the Chat stream chunks, as the SDK's accumulator does."""
    enc = codec("chat_completion").StreamEncoder(EncodeContext(model="m", source_protocol="responses"))
    raw = b"".join(enc.encode(e) for e in deepcopy(events))
    out = dict.fromkeys(CHAT_FIELDS, "")
    for line in raw.split(b"\n"):
        if line.startswith(b"data: {"):
            chunk = orjson.loads(line[6:])
            for choice in chunk.get("choices") or []:
                for k in CHAT_FIELDS:
                    out[k] += choice["delta"].get(k) or ""
    return {k: v.replace("\n\n", "") for k, v in out.items()}


def rule(type_id, config):
    return registry()[type_id](dict(config))


def client_whole(client: str, nodes: list) -> list:
    resp = Response(id="resp_1", model="m", output=deepcopy(nodes), finish_reason="stop")
    body = codec(client).encode_response(resp, EncodeContext(model="m", source_protocol="chat_completion"))
    return view(codec(client).decode_response(body).output)


def client_stream(client: str, events: list[ev.Event]) -> list:
    enc = codec(client).StreamEncoder(EncodeContext(model="m", source_protocol="chat_completion"))
    raw = b"".join(enc.encode(e) for e in deepcopy(events))
    decoder = codec(client).StreamDecoder()
    parser = SSEParser()
    out: list[ev.Event] = []
    for name, payload in [*parser.feed(raw), *parser.close()]:
        out.extend(decoder.feed(name, payload))
    done = [e for e in out if isinstance(e, ev.ResponseDone)]
    assert done, out
    return view(done[-1].output)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    nodes=answers(),
    cuts=st.lists(st.integers(min_value=1, max_value=40), max_size=12) | st.none(),
    which=st.integers(min_value=0, max_value=len(RULES) - 1),
)
def test_stream_equals_whole_response(nodes, cuts, which):
    type_id, config = RULES[which]
    expected_nodes = run_whole(rule(type_id, config), nodes)
    expected = plain(expected_nodes)
    out = run_stream(rule(type_id, config), stream_of(nodes, cuts))
    check_lifecycle(out)
    assert plain(accumulated(out)) == expected
    assert plain(done_nodes(out)) == expected
    assert plain(terminal(out)) == expected
    for client in ("responses", "messages"):
        assert client_stream(client, out) == client_whole(client, expected_nodes), client
    assert chat_stream_fields(out) == chat_whole_fields(expected_nodes)
