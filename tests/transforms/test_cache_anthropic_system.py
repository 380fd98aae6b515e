"""cache_anthropic_system: a breakpoint on the last system/developer node (reference 3.1)."""

import pytest

from gateway.protocols import codec
from gateway.protocols.base import EncodeContext
from gateway.urp import ImageNode, MediaSource, Request, TextNode
from transforms.base import TransformContext
from transforms.engine import CompiledRule, run_request, select
from transforms.lib.anthropic_cache import OWNER_KEY
from transforms.registry import canonical_id, registry
from transforms.validation import validate_rule

TYPE_ID = "cache_anthropic_system"
EPH = {"type": "ephemeral"}


def ctx(upstream="messages"):
    return TransformContext(logical_model="m", client_protocol="messages", upstream_protocol=upstream)


def apply(req, config=None, c=None, type_id=TYPE_ID):
    c = c or ctx()
    rule = CompiledRule(1, "provider", "request", None, registry()[type_id](config or {}))
    run_request(select([(rule,), (), ()], "request", "m"), req, c)
    return c


def test_system_node_marked():
    req = Request(model="m", input=[TextNode(role="system", content="S"), TextNode(role="user", content="U")])
    apply(req)
    assert req.input[0].extra["cache_control"] == EPH
    assert "cache_control" not in req.input[1].extra


def test_last_of_system_and_developer_is_marked():
    req = Request(
        model="m",
        input=[
            TextNode(role="system", content="A"),
            TextNode(role="developer", content="B"),
            TextNode(role="user", content="U"),
        ],
    )
    apply(req)
    assert "cache_control" not in req.input[0].extra
    assert req.input[1].extra["cache_control"] == EPH


def test_system_image_node_can_be_the_target():
    img = ImageNode(role="system", source=MediaSource(kind="url", url="https://x/i.png"))
    req = Request(
        model="m", input=[TextNode(role="system", content="A"), img, TextNode(role="user", content="U")]
    )
    apply(req)
    assert img.extra["cache_control"] == EPH


def test_client_marker_unchanged_and_not_owned():
    client = {"type": "ephemeral", "ttl": "1h", "client_extension": True}
    req = Request(
        model="m",
        input=[
            TextNode(role="system", content="S", extra={"cache_control": dict(client)}),
            TextNode(role="user", content="U"),
        ],
    )
    c = apply(req, {"ttl": "5m"})
    assert req.input[0].extra["cache_control"] == client
    assert c.shared[OWNER_KEY] == {}


def test_four_slots_used_counting_the_request_marker():
    users = [TextNode(role="user", content=f"u{i}", extra={"cache_control": EPH}) for i in range(3)]
    req = Request(
        model="m", input=[TextNode(role="system", content="S"), *users], extra={"cache_control": EPH}
    )
    apply(req)
    assert "cache_control" not in req.input[0].extra


def test_provider_then_key_chain_retunes_without_a_new_slot():
    users = [TextNode(role="user", content=f"u{i}", extra={"cache_control": EPH}) for i in range(3)]
    req, c = Request(model="m", input=[TextNode(role="system", content="S"), *users]), ctx()
    apply(req, {}, c)  # fourth breakpoint
    apply(req, {"ttl": "1h"}, c)  # retune at 4 is allowed
    assert req.input[0].extra["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert sum("cache_control" in n.extra for n in req.input) == 4


def test_ambiguous_twin_node_drops_ownership():
    req, c = (
        Request(model="m", input=[TextNode(role="user", content="U"), TextNode(role="system", content="S")]),
        ctx(),
    )
    apply(req, {}, c)
    # Another identical system node appears after ours: the target moves to it (no marker yet).
    req.input.insert(1, TextNode(role="system", content="S", extra={"cache_control": EPH}))
    req.input[2].extra.pop("cache_control")
    req.input.append(TextNode(role="system", content="S", extra={"cache_control": EPH}))
    apply(req, {"ttl": "1h"}, c)
    assert req.input[-1].extra["cache_control"] == EPH  # twin of another node: not owned, not retuned


def test_no_system_node_no_op_and_never_content():
    req = Request(model="m", input=[TextNode(role="user", content="U")], user="x")
    apply(req)
    assert req.input[0].extra == {} and req.user == "x" and req.model == "m"


def test_openai_upstream_no_op():
    req = Request(model="m", input=[TextNode(role="system", content="S")])
    apply(req, c=ctx("responses"))
    assert req.input[0].extra == {}


def test_wire_shape_and_alias():
    req = Request(model="m", input=[TextNode(role="system", content="S"), TextNode(role="user", content="U")])
    apply(req, {"ttl": "1h"})
    body = codec("messages").encode_request(
        req, EncodeContext(model="m", source_protocol="chat_completion", strip_nested=True)
    )
    assert body["system"] == [
        {"type": "text", "text": "S", "cache_control": {"type": "ephemeral", "ttl": "1h"}}
    ]
    assert canonical_id("auto_cache_system") == TYPE_ID


@pytest.mark.parametrize("config", [{"ttl": None}, {"ttl": 1}, {"extra": True}])
def test_bad_configs(config):
    assert validate_rule(transform=TYPE_ID, scope="api_key", phase="request", models=None, config=config)
