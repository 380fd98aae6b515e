"""image_markdown_to_output: the reference's examples and the parser's edge cases, metadata
handling, and the buffered stream mode."""

from __future__ import annotations

import pytest

from gateway.urp import ImageNode, MediaSource, Response, TextNode, ToolCallNode
from transforms.base import TransformContext
from transforms.builtin.image_markdown_to_output import parse
from transforms.registry import registry

TYPE_ID = "image_markdown_to_output"


def ctx(stream=False, protocol="chat_completion"):
    return TransformContext(logical_model="m", client_protocol=protocol, stream=stream)


def run(output):
    resp = Response(id="r", model="m", output=output)
    registry()[TYPE_ID]({}).apply_response(resp, ctx())
    return resp.output


def shape(nodes):
    return [
        (n.type, n.content)
        if n.type == "text"
        else (n.type, n.source.kind, n.source.url or (n.source.media_type, n.source.data))
        for n in nodes
    ]


def test_example_1_text_then_images_in_order():
    out = run(
        [
            TextNode(
                role="assistant",
                content="hello ![a](https://example.com/a.png) world ![b](data:image/png;base64,QUJD)",
            )
        ]
    )
    assert shape(out) == [
        ("text", "hello  world "),
        ("image", "url", "https://example.com/a.png"),
        ("image", "base64", ("image/png", "QUJD")),
    ]
    assert all(n.role == "assistant" for n in out) and out[1].id is None


@pytest.mark.parametrize(
    "text",
    [
        "see ![x](data:text/plain;base64,QQ==)",
        "![x] (y)",
        "![x](a b)",
        "![x]()",
        "![x](data:image/png;base64,)",
        "![unclosed",
        "![x](no-close",
        '![x](u "title")',
    ],
)
def test_example_2_not_images_left_unchanged(text):
    node = TextNode(role="assistant", content=text, extra={"signature": "s", "logprobs": []}, id="t1")
    out = run([node])
    assert out == [node] and node.content == text and node.extra == {"signature": "s", "logprobs": []}


def test_example_3_text_that_is_only_an_image_is_removed():
    assert shape(run([TextNode(role="assistant", content="![a](u)")])) == [("image", "url", "u")]


def test_relative_urls_and_whitespace_rules():
    spans, sources = parse("a ![x](b c) d ![y](rel/p.png)")
    assert [s.url for s in sources] == ["rel/p.png"]
    assert spans == [(14, 29)]


def test_metadata_cleared_and_annotation_ranges_shifted():
    text = "![a](u)see [doc] here"
    ann_after = {"type": "url_citation", "start_index": 11, "end_index": 16}
    ann_over = {"type": "url_citation", "start_index": 2, "end_index": 9}
    no_range = {"type": "file_citation"}
    node = TextNode(
        role="assistant",
        content=text,
        extra={"signature": "s", "logprobs": [1], "annotations": [ann_after, ann_over, no_range]},
    )
    out = run([node])
    assert node.content == "see [doc] here"
    assert "signature" not in node.extra and "logprobs" not in node.extra
    assert node.extra["annotations"] == [{"type": "url_citation", "start_index": 4, "end_index": 9}, no_range]
    assert node.content[4:9] == "[doc]"
    assert out[1].type == "image"


def test_only_assistant_text_is_touched():
    user = TextNode(role="user", content="![a](u)")
    call = ToolCallNode(call_id="c", name="f", arguments='{"x":"![a](u)"}')
    img = ImageNode(role="assistant", source=MediaSource(kind="url", url="v"))
    assert run([user, call, img]) == [user, call, img] and user.content == "![a](u)"


def test_streams_are_served_whole():
    t = registry()[TYPE_ID]({})
    assert t.needs_whole_response(ctx(stream=True, protocol="chat_completion"))
    assert t.needs_whole_response(ctx(stream=True, protocol="messages"))


def test_metadata():
    cls = registry()[TYPE_ID]
    assert cls.phases == ("response",) and cls.scopes == ("provider", "api_key")
    assert cls.validate_config({}) == [] and cls.validate_config({"x": 1})
