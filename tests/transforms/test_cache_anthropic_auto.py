"""cache_anthropic_auto: the request-level marker and its ownership (reference 3.1)."""

import pytest

from gateway.protocols import codec
from gateway.protocols.base import EncodeContext
from gateway.urp import Request, TextNode
from transforms.base import TransformContext
from transforms.engine import CompiledRule, run_request, select
from transforms.lib.anthropic_cache import OWNER_KEY
from transforms.registry import registry
from transforms.validation import validate_rule

TYPE_ID = "cache_anthropic_auto"


def ctx(upstream="messages"):
    return TransformContext(logical_model="m", client_protocol="messages", upstream_protocol=upstream)


def apply(req, config=None, c=None):
    c = c or ctx()
    rule = CompiledRule(1, "provider", "request", None, registry()[TYPE_ID](config or {}))
    run_request(select([(rule,), (), ()], "request", "m"), req, c)
    return c


def marked(n):
    return TextNode(role="user", content=f"u{n}", extra={"cache_control": {"type": "ephemeral"}})


def test_not_anthropic_upstream_is_a_no_op():
    req = Request(model="m")
    apply(req, c=ctx("chat_completion"))
    assert "cache_control" not in req.extra


def test_messages_upstream_gets_the_marker():
    req = Request(model="m")
    apply(req)
    assert req.extra["cache_control"] == {"type": "ephemeral"}


def test_four_node_markers_leave_no_slot():
    req = Request(model="m", input=[marked(i) for i in range(4)])
    apply(req)
    assert "cache_control" not in req.extra


def test_three_node_markers_leave_one():
    req = Request(model="m", input=[marked(i) for i in range(3)])
    apply(req, {"ttl": "1h"})
    assert req.extra["cache_control"] == {"type": "ephemeral", "ttl": "1h"}


def test_owned_marker_is_retuned_both_ways_with_one_ownership_entry():
    req, c = Request(model="m"), ctx()
    apply(req, {}, c)
    apply(req, {"ttl": "1h"}, c)
    assert req.extra["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    apply(req, {"ttl": "5m"}, c)
    assert req.extra["cache_control"] == {"type": "ephemeral"}
    assert list(c.shared[OWNER_KEY]) == ["request"]


def test_owned_marker_retuned_even_with_four_node_markers():
    req, c = Request(model="m"), ctx()
    apply(req, {}, c)
    req.input = [marked(i) for i in range(4)]
    apply(req, {"ttl": "1h"}, c)
    assert req.extra["cache_control"] == {"type": "ephemeral", "ttl": "1h"}


def test_client_marker_is_never_touched_even_by_a_later_attempt():
    client = {"type": "ephemeral", "ttl": "1h", "x": 1}
    req = Request(model="m", extra={"cache_control": dict(client)})
    c = apply(req, {"ttl": "5m"})
    assert req.extra["cache_control"] == client
    assert c.shared[OWNER_KEY] == {}
    # A fresh attempt (fresh context) cannot claim a marker an earlier attempt wrote either.
    req2 = Request(model="m")
    apply(req2, {})
    apply(req2, {"ttl": "1h"}, ctx())
    assert req2.extra["cache_control"] == {"type": "ephemeral"}


def test_marker_changed_by_someone_else_is_no_longer_owned():
    req, c = Request(model="m"), ctx()
    apply(req, {}, c)
    req.extra["cache_control"] = {"type": "ephemeral", "other": True}
    apply(req, {"ttl": "1h"}, c)
    assert req.extra["cache_control"] == {"type": "ephemeral", "other": True}


def test_ownership_never_reaches_the_wire():
    req, c = Request(model="m", input=[TextNode(role="user", content="hi")]), ctx()
    apply(req, {}, c)
    body = codec("messages").encode_request(
        req, EncodeContext(model="m", source_protocol="messages", strip_nested=False)
    )
    assert body["cache_control"] == {"type": "ephemeral"}
    assert OWNER_KEY not in str(body)


@pytest.mark.parametrize("config", [{"ttl": None}, {"ttl": 5}, {"ttl": "2h"}, {"other": 1}])
def test_bad_configs_rejected(config):
    assert validate_rule(transform=TYPE_ID, scope="provider", phase="request", models=None, config=config)


def test_defaults_and_scopes():
    cls = registry()[TYPE_ID]
    assert cls(None).config == {"ttl": "5m"}
    assert cls.scopes == ("provider", "api_key") and cls.phases == ("request",)
