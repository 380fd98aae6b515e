"""prompt_append_empty_user through the chain engine."""

from gateway.urp import ReasoningNode, Request, TextNode, ToolCallNode, ToolResultNode
from gateway.urp.nodes import EnvelopeExtraNode, RefusalNode
from transforms.base import TransformContext
from transforms.engine import CompiledRule, run_request, select
from transforms.registry import registry
from transforms.validation import validate_rule

TYPE_ID = "prompt_append_empty_user"


def run(config, nodes, *, models=None, model="gpt-4o"):
    cls = registry[TYPE_ID]
    assert cls.validate_config(config) == []
    rule = CompiledRule(1, "provider", "request", models, cls(config))
    req = Request(model=model, input=nodes)
    ctx = TransformContext(logical_model=model, client_protocol="chat_completion")
    run_request(select([(rule,), (), ()], "request", model), req, ctx)
    return req.input


def shape(nodes):
    return [(type(n).__name__, getattr(n, "role", None), getattr(n, "content", None)) for n in nodes]


def test_appends_single_space_user_after_assistant():
    out = run({}, [TextNode(role="user", content="hi"), TextNode(role="assistant", content="hello")])
    assert shape(out) == [
        ("TextNode", "user", "hi"),
        ("TextNode", "assistant", "hello"),
        ("TextNode", "user", " "),
    ]
    assert out[-1].id is None and out[-1].phase is None and out[-1].extra == {}


def test_custom_content():
    out = run({"content": "continue"}, [TextNode(role="assistant", content="x")])
    assert shape(out)[-1] == ("TextNode", "user", "continue")


def test_empty_string_content_is_accepted():
    out = run({"content": ""}, [TextNode(role="assistant", content="x")])
    assert shape(out)[-1] == ("TextNode", "user", "")


def test_last_user_unchanged():
    assert shape(run({}, [TextNode(role="user", content="hi")])) == [("TextNode", "user", "hi")]


def test_trailing_tool_result_unchanged():
    nodes = [
        TextNode(role="user", content="u"),
        ToolCallNode(call_id="c1", name="f"),
        ToolResultNode(call_id="c1", content=[TextNode(content="r")]),
    ]
    assert len(run({}, nodes)) == 3


def test_empty_input_and_system_last_unchanged():
    assert run({}, []) == []
    assert len(run({}, [TextNode(role="system", content="s")])) == 1
    assert len(run({}, [TextNode(role="developer", content="d")])) == 1


def test_trailing_control_node_unchanged():
    assert len(run({}, [TextNode(role="assistant", content="a"), EnvelopeExtraNode(extra={"x": 1})])) == 2


def test_tool_call_reasoning_refusal_count_as_assistant():
    for last in (
        ToolCallNode(call_id="c", name="f"),
        ReasoningNode(content="think"),
        RefusalNode(content="no"),
    ):
        out = run({}, [TextNode(role="user", content="u"), last])
        assert shape(out)[-1] == ("TextNode", "user", " ")


def test_applying_twice_appends_once():
    cls = registry[TYPE_ID]
    rules = [
        CompiledRule(1, "provider", "request", None, cls({})),
        CompiledRule(2, "global", "request", None, cls({})),
    ]
    req = Request(model="m", input=[TextNode(role="assistant", content="a")])
    executed = run_request(
        select([(rules[0],), (rules[1],), ()], "request", "m"),
        req,
        TransformContext(logical_model="m", client_protocol="messages"),
    )
    assert [e.scope for e in executed] == ["provider", "global"]
    assert len(req.input) == 2


def test_model_glob_not_matching_skips_rule():
    out = run({}, [TextNode(role="assistant", content="a")], models=["claude-*"], model="gpt-4o")
    assert len(out) == 1


def test_schema_and_scopes():
    cls = registry[TYPE_ID]
    assert cls.config_schema["properties"]["content"]["format"] == "multiline"
    assert cls.config_schema["properties"]["content"]["default"] == " "
    assert set(cls.scopes) == {"provider", "global", "api_key"}
    assert validate_rule(transform=TYPE_ID, scope="api_key", phase="request", models=None, config={}) == {}
    errors = validate_rule(
        transform=TYPE_ID, scope="provider", phase="request", models=None, config={"content": 5}
    )
    assert errors["config"][0].startswith("content:")
    errors = validate_rule(transform=TYPE_ID, scope="provider", phase="response", models=None, config={})
    assert "phase" in errors
    assert cls.name["zh"] and cls.description["zh"]


def test_alias_resolves():
    assert registry.canonical_id("append_empty_user_message") == TYPE_ID
