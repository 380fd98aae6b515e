"""cache_anthropic_tool_use: a breakpoint on the trailing tool result (reference 3.1)."""

from gateway.urp import Request, TextNode, ToolCallNode, ToolResultNode
from transforms.base import TransformContext
from transforms.engine import CompiledRule, run_request, select
from transforms.registry import canonical_id, registry

TYPE_ID = "cache_anthropic_tool_use"
EPH = {"type": "ephemeral"}


def apply(req, config=None, c=None, type_id=TYPE_ID):
    c = c or TransformContext(logical_model="m", client_protocol="messages", upstream_protocol="messages")
    rule = CompiledRule(1, "provider", "request", None, registry()[type_id](config or {}))
    run_request(select([(rule,), (), ()], "request", "m"), req, c)
    return c


def loop(n=1):
    nodes = [TextNode(role="user", content="run again")]
    for i in range(n):
        nodes += [
            ToolCallNode(call_id=f"c{i}", name="run"),
            ToolResultNode(call_id=f"c{i}", content=[TextNode(role="user", content=f"r{i}")]),
        ]
    return nodes


def test_trailing_result_marked_and_idempotent():
    req = Request(model="m", input=loop())
    c = apply(req)
    assert req.input[2].extra["cache_control"] == EPH and req.input[0].extra == {}
    apply(req, {}, c)
    assert req.input[2].extra["cache_control"] == EPH
    assert sum("cache_control" in n.extra for n in req.input) == 1


def test_not_a_tool_result_turn():
    req = Request(model="m", input=[TextNode(role="user", content="hi")])
    apply(req)
    assert req.input[0].extra == {}


def test_growing_loop_marker_advances_per_request():
    first = Request(model="m", input=loop(1))
    apply(first)
    second = Request(model="m", input=loop(2))
    apply(second)
    assert "cache_control" in second.input[-1].extra and "cache_control" not in second.input[2].extra


def test_nested_entry_markers_do_not_count_and_are_kept():
    nodes = loop()
    nodes[-1].content[0].extra["cache_control"] = {"type": "ephemeral", "ttl": "1h"}
    req = Request(model="m", input=nodes, extra={"cache_control": EPH})
    for i in range(2):
        req.input.insert(0, TextNode(role="user", content=f"x{i}", extra={"cache_control": EPH}))
    apply(req)  # 2 node markers + request-level = 3 slots: one left
    assert req.input[-1].extra["cache_control"] == EPH
    assert req.input[-1].content[0].extra["cache_control"] == {"type": "ephemeral", "ttl": "1h"}


def test_client_marker_on_result_left_alone():
    nodes = loop()
    nodes[-1].extra["cache_control"] = {"type": "ephemeral", "ttl": "1h"}
    req = Request(model="m", input=nodes)
    apply(req, {"ttl": "5m"})
    assert req.input[-1].extra["cache_control"] == {"type": "ephemeral", "ttl": "1h"}


def test_system_and_tool_use_share_the_budget():
    users = [TextNode(role="user", content=f"u{i}", extra={"cache_control": EPH}) for i in range(2)]
    req = Request(
        model="m",
        input=[TextNode(role="system", content="S"), *users, *loop()[1:]],
        extra={"cache_control": EPH},
    )
    c = apply(req, type_id="cache_anthropic_system")
    apply(req, {}, c)
    assert "cache_control" in req.input[0].extra and "cache_control" not in req.input[-1].extra
    assert canonical_id("auto_cache_tool_use") == TYPE_ID


def test_openai_upstream_no_op():
    req = Request(model="m", input=loop())
    apply(
        req,
        c=TransformContext(
            logical_model="m", client_protocol="messages", upstream_protocol="chat_completion"
        ),
    )
    assert req.input[-1].extra == {}
