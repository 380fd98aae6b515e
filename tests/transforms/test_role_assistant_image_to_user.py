"""role_assistant_image_to_user through the chain engine."""

from gateway.urp import AudioNode, ImageNode, MediaSource, Request, TextNode, ToolCallNode, ToolResultNode
from gateway.urp.nodes import EnvelopeExtraNode
from transforms.base import TransformContext
from transforms.engine import CompiledRule, run_request, select
from transforms.registry import registry
from transforms.validation import validate_rule

TYPE_ID = "role_assistant_image_to_user"


def run(nodes):
    cls = registry[TYPE_ID]
    rule = CompiledRule(1, "api_key", "request", None, cls({}))
    req = Request(model="m", input=nodes)
    run_request(
        select([(), (), (rule,)], "request", "m"),
        req,
        TransformContext(logical_model="m", client_protocol="chat_completion"),
    )
    return req.input


def img(role, url, id=None):
    return ImageNode(role=role, source=MediaSource(kind="url", url=url), id=id, extra={"k": url})


def shape(nodes):
    return [
        (
            n.type,
            getattr(n, "role", None),
            getattr(n, "content", None)
            if n.type == "text"
            else getattr(getattr(n, "source", None), "url", None),
        )
        for n in nodes
    ]


def test_image_moves_before_next_user_text():
    out = run(
        [
            TextNode(content="sharing now"),
            TextNode(role="assistant", content="shown below"),
            img("assistant", "a", id="img_1"),
            TextNode(content="what color is it?"),
        ]
    )
    assert shape(out) == [
        ("text", "user", "sharing now"),
        ("text", "assistant", "shown below"),
        ("image", "user", "a"),
        ("text", "user", "what color is it?"),
    ]
    assert out[2].id is None and out[2].extra == {"k": "a"}


def test_image_without_anchor_goes_to_end():
    out = run([TextNode(content="q"), TextNode(role="assistant", content="a"), img("assistant", "x")])
    assert shape(out)[-1] == ("image", "user", "x")


def test_tool_nodes_are_skipped_when_finding_the_anchor():
    out = run(
        [
            TextNode(role="assistant", content="let me check"),
            img("assistant", "x"),
            ToolCallNode(call_id="c", name="f"),
            ToolResultNode(call_id="c", content=[TextNode(content="r")]),
            TextNode(content="thanks"),
        ]
    )
    assert [n.type for n in out] == ["text", "tool_call", "tool_result", "image", "text"]
    assert out[3].role == "user" and out[4].content == "thanks"


def test_images_sharing_an_anchor_keep_order_and_other_roles_untouched():
    user_img = img("user", "u")
    audio = AudioNode(role="assistant", source=MediaSource(kind="url", url="snd"))
    ctrl = EnvelopeExtraNode(extra={"x": 1})
    out = run([img("assistant", "1"), audio, img("assistant", "2"), img("system", "s"), ctrl, user_img])
    assert shape(out) == [
        ("audio", "assistant", "snd"),
        ("image", "system", "s"),
        ("envelope_extra", "control", None),
        ("image", "user", "1"),
        ("image", "user", "2"),
        ("image", "user", "u"),
    ]


def test_idempotent():
    nodes = [TextNode(role="assistant", content="a"), img("assistant", "x"), TextNode(content="u")]
    once = shape(run(nodes))
    assert shape(run(run(nodes))) == once


def test_any_config_key_is_invalid():
    errors = validate_rule(
        transform=TYPE_ID, scope="provider", phase="request", models=None, config={"unexpected": 1}
    )
    assert "config" in errors
    for scope in ("provider", "global", "api_key"):
        assert validate_rule(transform=TYPE_ID, scope=scope, phase="request", models=None, config={}) == {}
