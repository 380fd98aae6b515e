"""prompt_strip_anthropic_billing_header through the chain engine."""

from gateway.urp import ImageNode, MediaSource, Request, TextNode
from gateway.urp.nodes import EnvelopeExtraNode
from transforms.base import TransformContext
from transforms.engine import CompiledRule, run_request, select
from transforms.registry import registry
from transforms.validation import validate_rule

TYPE_ID = "prompt_strip_anthropic_billing_header"


def run(nodes, config=None, model="claude-sonnet-4"):
    cls = registry[TYPE_ID]
    rule = CompiledRule(1, "global", "request", None, cls(config or {}))
    req = Request(model=model, input=nodes)
    run_request(
        select([(), (rule,), ()], "request", model),
        req,
        TransformContext(logical_model=model, client_protocol="messages"),
    )
    return req.input


def test_strips_header_line_from_system_and_leaves_user_text():
    user_text = "x-anthropic-billing-header: this user text must remain;"
    out = run(
        [
            TextNode(role="system", content="x-anthropic-billing-header: cc_version=1; cch=abc;\nKeep this."),
            TextNode(role="user", content=user_text),
        ]
    )
    assert [(n.role, n.content) for n in out] == [("system", "Keep this."), ("user", user_text)]


def test_node_with_only_the_header_is_removed():
    assert run([TextNode(role="system", content="x-anthropic-billing-header: cc_version=1; cch=abc;")]) == []


def test_indented_header_in_developer_text():
    out = run([TextNode(role="developer", content="A\n   x-anthropic-billing-header: z\nB")])
    assert [(n.role, n.content) for n in out] == [("developer", "A\nB")]


def test_crlf_lines():
    out = run([TextNode(role="system", content="x-anthropic-billing-header: a\r\nKeep\r\n")])
    assert out[0].content == "Keep"


def test_case_sensitive_and_only_at_line_start():
    content = "X-Anthropic-Billing-Header: keep\nnote x-anthropic-billing-header: keep too"
    assert run([TextNode(role="system", content=content)])[0].content == content


def test_inspected_nodes_are_trimmed_and_empty_ones_removed():
    out = run(
        [
            TextNode(role="system", content=""),
            TextNode(role="system", content="\nS\n"),
            TextNode(role="user", content="\nU\n"),
        ]
    )
    assert [(n.role, n.content) for n in out] == [("system", "S"), ("user", "\nU\n")]


def test_other_nodes_untouched_and_idempotent():
    image = ImageNode(role="system", source=MediaSource(kind="url", url="https://x/i.png"))
    ctrl = EnvelopeExtraNode(extra={"cache_control": {"type": "ephemeral"}})
    assistant = TextNode(role="assistant", content="x-anthropic-billing-header: a")
    nodes = [ctrl, TextNode(role="system", content="x-anthropic-billing-header: 1\nS"), image, assistant]
    once = run(nodes)
    assert once[0] is ctrl and once[2] is image and once[3] is assistant
    assert once[1].content == "S" and assistant.content == "x-anthropic-billing-header: a"
    twice = run(list(once))
    assert [(n.type, getattr(n, "content", None)) for n in twice] == [
        (n.type, getattr(n, "content", None)) for n in once
    ]


def test_rejects_config_keys_and_accepts_every_scope():
    errors = validate_rule(transform=TYPE_ID, scope="provider", phase="request", models=None, config={"x": 1})
    assert "config" in errors
    for scope in ("provider", "global", "api_key"):
        assert validate_rule(transform=TYPE_ID, scope=scope, phase="request", models=None, config={}) == {}


def test_historical_ids():
    for alias in ("remove_anthropic_billing_header", "strip_claude_code_billing_header"):
        assert registry.canonical_id(alias) == TYPE_ID
