"""role_developer_to_system through the chain engine."""

from gateway.urp import FileNode, ImageNode, MediaSource, ProviderItemNode, Request, TextNode, ToolResultNode
from transforms.base import TransformContext
from transforms.engine import CompiledRule, run_request, select
from transforms.registry import registry
from transforms.validation import validate_rule

TYPE_ID = "role_developer_to_system"


def run(nodes, model="o3"):
    rule = CompiledRule(1, "provider", "request", ["o*"], registry[TYPE_ID]({}))
    req = Request(model=model, input=nodes)
    run_request(
        select([(rule,), (), ()], "request", model),
        req,
        TransformContext(logical_model=model, client_protocol="responses"),
    )
    return [getattr(n, "role", None) for n in req.input]


def test_developer_becomes_system():
    assert run([TextNode(role="developer", content="D"), TextNode(content="U")]) == ["system", "user"]


def test_all_role_bearing_kinds_and_nothing_else():
    nodes = [
        ImageNode(role="developer", source=MediaSource(kind="url", url="u")),
        FileNode(role="developer", source=MediaSource(kind="file_id", file_id="f")),
        ProviderItemNode(role="developer", origin_protocol="responses", item_type="x", body={}),
        ToolResultNode(call_id="c", content=[TextNode(role="developer", content="inner")]),
        TextNode(role="system", content="S"),
    ]
    assert run(nodes) == ["system", "system", "system", "tool", "system"]
    assert nodes[3].content[0].role == "developer"


def test_model_glob_applies():
    assert run([TextNode(role="developer", content="D")], model="gpt-4o") == ["developer"]


def test_no_config_allowed():
    assert "config" in validate_rule(
        transform=TYPE_ID, scope="provider", phase="request", models=None, config={"a": 1}
    )
    assert registry.canonical_id("developer_to_system_role") == TYPE_ID
