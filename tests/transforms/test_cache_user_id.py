"""cache_user_id: the key owner as end-user id when cache markers are present (reference 3.1)."""

from gateway.protocols import codec
from gateway.protocols.base import EncodeContext
from gateway.urp import Request, TextNode
from transforms.base import TransformContext
from transforms.engine import CompiledRule, run_request, select
from transforms.registry import canonical_id, registry

EPH = {"type": "ephemeral"}


def apply(req, username="alice", upstream="messages"):
    c = TransformContext(
        logical_model="m", client_protocol="messages", upstream_protocol=upstream, username=username
    )
    rule = CompiledRule(1, "api_key", "request", None, registry()["cache_user_id"]({"ignored": 1}))
    run_request(select([(), (), (rule,)], "request", "m"), req, c)
    return req


def marked():
    return [
        TextNode(role="system", content="S", extra={"cache_control": EPH}),
        TextNode(role="user", content="hi"),
    ]


def wire(req, protocol):
    return codec(protocol).encode_request(
        req, EncodeContext(model="m", source_protocol="messages", strip_nested=False)
    )


def test_sets_user_and_metadata_user_id():
    req = apply(Request(model="m", input=marked()))
    assert req.user == "alice"
    assert wire(req, "messages")["metadata"] == {"user_id": "alice"}
    assert wire(req, "chat_completion")["user"] == "alice"


def test_needs_a_node_marker():
    assert apply(Request(model="m", input=[TextNode(role="user", content="hi")])).user is None
    assert (
        apply(
            Request(model="m", input=[TextNode(role="user", content="hi")], extra={"cache_control": EPH})
        ).user
        is None
    )


def test_client_values_never_changed():
    req = Request(model="m", input=marked(), user="bob", extra={"metadata": {"tag": 1}})
    apply(req)
    assert wire(req, "messages")["metadata"] == {"tag": 1, "user_id": "bob"}


def test_no_username_no_op():
    assert apply(Request(model="m", input=marked()), username=None).user is None
    assert canonical_id("auto_cache_user_id") == "cache_user_id"
