"""prompt_inject_system through the chain engine."""

import pytest

from gateway.urp import Request, TextNode, ToolResultNode
from gateway.urp.nodes import EnvelopeExtraNode
from transforms.base import TransformContext
from transforms.engine import CompiledRule, run_request, select
from transforms.registry import registry
from transforms.validation import validate_rule

TYPE_ID = "prompt_inject_system"


def run(config, nodes, model="gpt-4o"):
    cls = registry[TYPE_ID]
    assert cls.validate_config(config) == []
    rule = CompiledRule(1, "provider", "request", None, cls(config))
    req = Request(model=model, input=nodes)
    run_request(
        select([(rule,), (), ()], "request", model),
        req,
        TransformContext(logical_model=model, client_protocol="chat_completion"),
    )
    return [(n.type, getattr(n, "role", None), getattr(n, "content", None)) for n in req.input]


def S(text):
    return TextNode(role="system", content=text)


def U(text):
    return TextNode(role="user", content=text)


def test_prepend_goes_before_the_clients_system_prompt():
    assert run({"content": "P", "position": "prepend"}, [S("S"), U("U")]) == [
        ("text", "system", "P"),
        ("text", "system", "S"),
        ("text", "user", "U"),
    ]


def test_append_goes_after_the_last_system_node():
    assert run({"content": "A", "position": "append"}, [S("S1"), U("U"), S("S2")]) == [
        ("text", "system", "S1"),
        ("text", "user", "U"),
        ("text", "system", "S2"),
        ("text", "system", "A"),
    ]


def test_prepend_with_several_system_nodes_uses_the_first():
    assert run({"content": "P", "position": "prepend"}, [S("S1"), U("U"), S("S2")]) == [
        ("text", "system", "P"),
        ("text", "system", "S1"),
        ("text", "user", "U"),
        ("text", "system", "S2"),
    ]


@pytest.mark.parametrize("position", ["prepend", "append"])
def test_without_system_node_injects_at_start(position):
    assert run({"content": "X", "position": position}, [U("U"), TextNode(role="assistant", content="A")]) == [
        ("text", "system", "X"),
        ("text", "user", "U"),
        ("text", "assistant", "A"),
    ]


def test_single_system_node_prepend_and_append_differ():
    pre = run({"content": "X", "position": "prepend"}, [S("S"), U("U")])
    app = run({"content": "X", "position": "append"}, [S("S"), U("U")])
    assert pre != app
    assert app == [("text", "system", "S"), ("text", "system", "X"), ("text", "user", "U")]


def test_developer_nodes_do_not_count_as_system():
    assert run({"content": "A", "position": "append"}, [TextNode(role="developer", content="D"), U("U")]) == [
        ("text", "system", "A"),
        ("text", "developer", "D"),
        ("text", "user", "U"),
    ]


def test_original_nodes_are_not_edited_and_control_nodes_stay_attached():
    ctrl = EnvelopeExtraNode(extra={"name": "x"})
    system = S("S")
    result = ToolResultNode(call_id="c", content=[TextNode(content="r")])
    cls = registry[TYPE_ID]
    req = Request(model="m", input=[ctrl, system, U("U"), result])
    run_request(
        [CompiledRule(None, "global", "request", None, cls({"content": "P", "position": "prepend"}))],
        req,
        TransformContext(logical_model="m", client_protocol="responses"),
    )
    assert req.input[0].content == "P"
    assert req.input[1] is ctrl and req.input[2] is system and system.content == "S"
    assert req.input[-1] is result


def test_schema_requires_content_and_position():
    cls = registry[TYPE_ID]
    props = cls.config_schema["properties"]
    assert props["content"]["format"] == "multiline"
    assert props["position"]["enum"] == ["prepend", "append"]
    errors = validate_rule(transform=TYPE_ID, scope="provider", phase="request", models=None, config={})
    assert any("content" in m for m in errors["config"])
    errors = validate_rule(
        transform=TYPE_ID,
        scope="api_key",
        phase="request",
        models=None,
        config={"content": "x", "position": "middle"},
    )
    assert errors["config"][0].startswith("position:")
    errors = validate_rule(
        transform=TYPE_ID,
        scope="provider",
        phase="request",
        models=None,
        config={"content": "", "position": "append"},
    )
    assert errors["config"][0].startswith("content:")
    assert (
        validate_rule(
            transform=TYPE_ID,
            scope="global",
            phase="request",
            models=["gpt-*"],
            config={"content": "x", "position": "append", "note": "kept"},
        )
        == {}
    )


# -- issue 19: a string system message stays a string ---------------------------------------------


def _through(client_protocol: str, body: dict, config: dict) -> list:
    """Decode a client body, run the rule, encode for a Chat upstream; the upstream's messages."""
    from gateway.protocols import codec
    from gateway.protocols.base import EncodeContext

    cls = registry()[TYPE_ID]
    rule = CompiledRule(1, "provider", "request", None, cls(config))
    req = codec(client_protocol).decode_request(body)
    run_request(
        select([(rule,), (), ()], "request", "m"),
        req,
        TransformContext(logical_model="m", client_protocol=client_protocol),
    )
    out = codec("chat_completion").encode_request(
        req, EncodeContext(model="m", source_protocol=client_protocol)
    )
    return out["messages"]


@pytest.mark.parametrize("position", ["append", "prepend"])
def test_a_chat_clients_string_system_message_stays_a_string(position):
    messages = _through(
        "chat_completion",
        {
            "model": "m",
            "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}],
        },
        {"content": "Injected.", "position": position},
    )
    system = [m for m in messages if m["role"] == "system"]
    assert all(isinstance(m["content"], str) for m in system), system
    text = "\n\n".join(m["content"] for m in system)
    assert "Be brief." in text and "Injected." in text
    assert (
        text.index("Injected.") < text.index("Be brief.")
        if position == "prepend"
        else (text.index("Be brief.") < text.index("Injected."))
    )


@pytest.mark.parametrize(
    "client_protocol, body",
    [
        ("responses", {"model": "m", "instructions": "Be brief.", "input": "hi"}),
        (
            "messages",
            {
                "model": "m",
                "max_tokens": 5,
                "system": "Be brief.",
                "messages": [{"role": "user", "content": "hi"}],
            },
        ),
    ],
)
def test_a_string_system_prompt_from_other_clients_stays_a_string(client_protocol, body):
    messages = _through(client_protocol, body, {"content": "Injected.", "position": "append"})
    system = [m for m in messages if m["role"] in ("system", "developer")]
    assert all(isinstance(m["content"], str) for m in system), system
    assert (
        "Be brief." in "".join(m["content"] for m in system)
        and "Injected." in system[0]["content"] + system[-1]["content"]
    )


def test_a_chat_clients_array_system_message_stays_an_array():
    messages = _through(
        "chat_completion",
        {
            "model": "m",
            "messages": [
                {"role": "system", "content": [{"type": "text", "text": "Be brief."}]},
                {"role": "user", "content": "hi"},
            ],
        },
        {"content": "Injected.", "position": "append"},
    )
    assert messages[0]["content"] == [
        {"type": "text", "text": "Be brief."},
        {"type": "text", "text": "Injected."},
    ]
