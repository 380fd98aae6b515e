"""image_output_to_markdown: the reference's examples (placement, templates, percent-encoding,
a new text node when there is none) and the stream's terminal event."""

from __future__ import annotations

from gateway.urp import ImageNode, MediaSource, Response, TextNode
from gateway.urp import events as ev
from transforms.base import TransformContext
from transforms.registry import registry

TYPE_ID = "image_output_to_markdown"


def ctx():
    return TransformContext(logical_model="m", client_protocol="chat_completion")


def url_image(url):
    return ImageNode(role="assistant", source=MediaSource(kind="url", url=url))


def run(config, output):
    resp = Response(id="r", model="m", output=output)
    registry()[TYPE_ID](config).apply_response(resp, ctx())
    return resp.output


def test_example_1_appended_without_separator_signature_and_logprobs_cleared():
    text = TextNode(
        role="assistant",
        content="hello",
        extra={"signature": "s", "logprobs": [1], "annotations": [{"type": "url_citation"}]},
    )
    out = run({}, [text, url_image("https://example.com/image.png")])
    assert text.content == "hello![image](https://example.com/image.png)"
    assert "signature" not in text.extra and "logprobs" not in text.extra
    assert text.extra["annotations"] == [{"type": "url_citation"}]
    assert len(out) == 2 and out[1].type == "image"  # the image node stays


def test_example_2_template_with_percent_encoding():
    img = ImageNode(
        role="assistant", source=MediaSource(kind="base64", media_type="image/png", data="ab/c+=,")
    )
    out = run(
        {"template": "https://cdn.example/render/{{data_urlencoded}}?src={{src_urlencoded}}"},
        [TextNode(role="assistant", content=""), img],
    )
    assert out[0].content == (
        "https://cdn.example/render/ab%2Fc%2B%3D%2C?src=data%3Aimage%2Fpng%3Bbase64%2Cab%2Fc%2B%3D%2C"
    )


def test_example_3_raw_placeholders_for_a_url_source():
    out = run(
        {"template": "src={{src}} url={{url}} media={{media_type}} data={{data}}"},
        [url_image("https://example.com/a.png"), TextNode(role="assistant", content="")],
    )
    assert out[1].content == "src=https://example.com/a.png url=https://example.com/a.png media= data="


def test_example_4_image_only_gets_a_new_text_node():
    out = run({}, [url_image("u1")])
    assert [n.type for n in out] == ["image", "text"]
    assert out[1].role == "assistant" and out[1].content == "![image](u1)" and out[1].id is None


def test_placement_next_text_then_last_text_file_ids_and_user_images_skipped():
    a, b = TextNode(role="assistant", content="A"), TextNode(role="assistant", content="B")
    user = ImageNode(role="user", source=MediaSource(kind="url", url="user"))
    fid = ImageNode(role="assistant", source=MediaSource(kind="file_id", file_id="f1"))
    run({}, [url_image("one"), a, user, b, url_image("two"), fid])
    assert a.content == "A![image](one)"
    assert b.content == "B![image](two)"


def test_stream_rewrites_only_the_terminal_output():
    t = registry()[TYPE_ID]({})
    text = TextNode(role="assistant", content="hi")
    delta = ev.NodeDelta(index=0, kind=ev.TEXT, delta="hi")
    done = ev.ResponseDone(output=[text, url_image("u")])
    state = t.new_stream_state(ctx())
    assert t.apply_event(delta, state, ctx()) == [delta] and delta.delta == "hi"
    t.apply_event(done, state, ctx())
    assert done.output[0].content == "hi![image](u)"
    assert not t.needs_whole_response(
        TransformContext(logical_model="m", client_protocol="chat_completion", stream=True)
    )


def test_metadata():
    cls = registry()[TYPE_ID]
    assert cls.phases == ("response",) and cls.scopes == ("provider", "api_key")
    assert cls.validate_config({"template": ""})
    assert not cls.validate_config({"template": "{{src}}"})
