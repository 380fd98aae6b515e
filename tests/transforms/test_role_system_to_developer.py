"""role_system_to_developer through the chain engine."""

from gateway.urp import AudioNode, MediaSource, ReasoningNode, Request, TextNode
from transforms.base import TransformContext
from transforms.engine import CompiledRule, run_request, select
from transforms.registry import registry
from transforms.validation import validate_rule

TYPE_ID = "role_system_to_developer"


def run(nodes):
    rule = CompiledRule(1, "api_key", "request", None, registry[TYPE_ID]({}))
    req = Request(model="o3", input=nodes)
    run_request(
        select([(), (), (rule,)], "request", "o3"),
        req,
        TransformContext(logical_model="o3", client_protocol="chat_completion"),
    )
    return [(n.type, getattr(n, "role", None)) for n in req.input]


def test_system_becomes_developer():
    assert run([TextNode(role="system", content="S"), TextNode(content="U")]) == [
        ("text", "developer"),
        ("text", "user"),
    ]


def test_other_kinds_and_roles():
    out = run(
        [
            AudioNode(role="system", source=MediaSource(kind="url", url="a")),
            ReasoningNode(content="r"),
            TextNode(role="developer", content="D"),
            TextNode(role="assistant", content="A"),
        ]
    )
    assert out == [
        ("audio", "developer"),
        ("reasoning", "assistant"),
        ("text", "developer"),
        ("text", "assistant"),
    ]


def test_round_trip_with_developer_to_system():
    reg = registry
    rules = (
        CompiledRule(1, "provider", "request", None, reg[TYPE_ID]({})),
        CompiledRule(2, "provider", "request", None, reg["role_developer_to_system"]({})),
    )
    req = Request(model="m", input=[TextNode(role="system", content="S")])
    executed = run_request(
        select([rules, (), ()], "request", "m"),
        req,
        TransformContext(logical_model="m", client_protocol="messages"),
    )
    assert [e.transform for e in executed] == [TYPE_ID, "role_developer_to_system"]
    assert req.input[0].role == "system"


def test_validation():
    assert validate_rule(transform=TYPE_ID, scope="api_key", phase="request", models=None, config={}) == {}
    assert "phase" in validate_rule(
        transform=TYPE_ID, scope="api_key", phase="response", models=None, config={}
    )
    assert registry.canonical_id("system_to_developer_role") == TYPE_ID
