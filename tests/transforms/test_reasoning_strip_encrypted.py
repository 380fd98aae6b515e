"""reasoning_strip_encrypted: opaque payloads leave responses and streams; text stays."""

from gateway.protocols.gemini.common import SIGNATURE
from gateway.urp import EnvelopeExtraNode, ReasoningNode, Request, ToolCallNode
from gateway.urp import events as ev
from tests.transforms.streams import (
    accumulated,
    check_lifecycle,
    plain,
    run_stream,
    run_whole,
    stream_of,
    terminal,
)
from transforms.base import TransformContext
from transforms.registry import canonical_id, registry

TYPE_ID = "reasoning_strip_encrypted"


def test_reference_example():
    node = ReasoningNode(
        content="plaintext cot",
        encrypted="mz2.aaa",
        summary="summary",
        extra={"encrypted_content": "mz2.bbb", "other": 1},
    )
    out = run_whole(registry()[TYPE_ID](), [node])[0]
    assert (out.content, out.summary, out.encrypted, out.extra) == (
        "plaintext cot",
        "summary",
        None,
        {"other": 1},
    )


def test_control_node_start_and_tool_call_signature():
    control = EnvelopeExtraNode(extra={"type": "reasoning", "encrypted_content": "mz2.p", "id": "rs_1"})
    out = run_stream(
        registry()[TYPE_ID](), [ev.NodeStart(index=0, node=control, extra={"encrypted_content": "x"})]
    )
    assert out[0].node.extra == {"type": "reasoning", "id": "rs_1"} and out[0].extra == {}
    call = ToolCallNode(call_id="c", name="f", arguments="{}", extra={SIGNATURE: "sig"})
    out = run_whole(registry()[TYPE_ID](), [call])[0]
    assert out.extra == {} and out.arguments == "{}"


def test_stream_drops_encrypted_deltas_and_matches_whole():
    nodes = [ReasoningNode(content="c", summary="s", encrypted="raw-or-enveloped")]
    out = run_stream(registry()[TYPE_ID](), stream_of(nodes, [3]))
    check_lifecycle(out)
    assert not [e for e in out if isinstance(e, ev.NodeDelta) and e.kind == ev.REASONING_ENCRYPTED]
    assert plain(accumulated(out)) == plain(terminal(out)) == [("reasoning", "c", "s", None)]


def test_requests_untouched():
    req = Request(model="m", input=[ReasoningNode(encrypted="e")])
    registry()[TYPE_ID]().apply_request(req, TransformContext(logical_model="m", client_protocol="responses"))
    assert req.input[0].encrypted == "e"


def test_alias():
    assert canonical_id("strip_encrypted_reasoning") == TYPE_ID
