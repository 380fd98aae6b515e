"""mz2. reasoning envelopes: wrap on the way out, unwrap (or drop) on replay."""

from __future__ import annotations

from gateway.proxy.envelopes import EnvelopeWrap, unwrap, unwrap_request, wrap
from gateway.urp import ReasoningNode, Request, Response, TextNode
from gateway.urp import events as ev
from tests.transforms.streams import check_lifecycle, run_stream, stream_of, terminal
from transforms.registry import registry


def test_round_trip_and_no_double_wrap():
    value = wrap("gAAAA-cipher", "responses", "o3", "rs_1")
    assert value.startswith("mz2.") and "=" not in value
    env = unwrap(value)
    assert (env.provider_type, env.model, env.item_id, env.payload) == (
        "responses",
        "o3",
        "rs_1",
        "gAAAA-cipher",
    )
    assert wrap(value, "messages", "x", None) == value
    assert unwrap("mz2.!!!") is None and unwrap("raw") is None


def test_unwrap_request_keeps_own_drops_foreign_passes_raw():
    own = ReasoningNode(encrypted=wrap("mine", "responses", "o3", "rs_1"))
    foreign = ReasoningNode(id="x", encrypted=wrap("theirs", "messages", "claude", None))
    other_model = ReasoningNode(encrypted=wrap("mine-too", "responses", "o4", None))
    raw = ReasoningNode(encrypted="raw-sig")
    text = TextNode(role="assistant", content="hi")
    req = Request(model="o3", input=[own, foreign, other_model, raw, text])
    unwrap_request(req, "responses", "o3")
    assert req.input == [own, raw, text]
    assert (own.encrypted, own.id) == ("mine", "rs_1")


def test_whole_response_wrapped():
    resp = Response(
        id="r",
        model="m",
        output=[ReasoningNode(id="rs_1", summary="s", encrypted="cipher"), ReasoningNode(content="plain")],
    )
    EnvelopeWrap("responses", "o3").apply_response(resp, None)
    assert unwrap(resp.output[0].encrypted).payload == "cipher" and resp.output[1].encrypted is None


def test_stream_buffers_fragments_and_wraps_once():
    nodes = [
        ReasoningNode(id="rs_1", summary="thought", encrypted="abcdefgh"),
        TextNode(role="assistant", content="x"),
    ]
    out = run_stream(EnvelopeWrap("responses", "o3"), stream_of(nodes, cuts=[2, 4, 6]))
    check_lifecycle(out)
    enc = [e.delta for e in out if isinstance(e, ev.NodeDelta) and e.kind == ev.REASONING_ENCRYPTED]
    assert len(enc) == 1 and unwrap(enc[0]).payload == "abcdefgh"
    assert terminal(out)[0].encrypted == enc[0]


def test_strip_encrypted_works_on_wrapped_values():
    resp = Response(id="r", model="m", output=[ReasoningNode(summary="s", encrypted="cipher")])
    EnvelopeWrap("responses", "o3").apply_response(resp, None)
    registry()["reasoning_strip_encrypted"]().apply_response(resp, None)
    assert resp.output[0].encrypted is None and resp.output[0].summary == "s"
