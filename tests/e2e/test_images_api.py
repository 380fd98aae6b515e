"""The Images API endpoints end to end with the official ``openai`` SDK: ``images.generate`` and
``images.edit`` through an ``openai_image`` upstream and through a Responses upstream with the
image generation tool; the seed's flow (``image_resolve_urls`` turning the upstream's image URL
into ``b64_json``); errors in OpenAI's shape."""

from __future__ import annotations

import base64
import io

import httpx
import openai
import pytest

from gateway.images.samples import PNG_RGB_8
from tests.e2e.transforms.rules import RuleSpec, last_upstream_body, openai_client, setup

RED = base64.b64decode(PNG_RGB_8)


def test_generate_through_an_openai_image_upstream(gateway, mock_upstream):
    s = setup(mock_upstream, "openai_image", "gpt-image-e2e")
    gateway.wait_config()
    result = openai_client(gateway, s.secret).images.generate(
        model=s.model, prompt="a red square", n=2, size="1024x1024", quality="low"
    )
    assert [base64.b64decode(d.b64_json) for d in result.data] == [RED, RED]
    assert result.data[0].revised_prompt == "a red square"
    assert result.usage.input_tokens == 6 and result.usage.output_tokens == 32  # two calls, summed
    bodies = [r["body"] for r in mock_upstream.requests()]
    assert len(bodies) == 2 and all(
        b == {"model": "up-gpt-image-e2e", "prompt": "a red square", "size": "1024x1024", "quality": "low"}
        for b in bodies
    )


def test_edit_with_image_and_mask_through_an_openai_image_upstream(gateway, mock_upstream):
    s = setup(mock_upstream, "openai_image", "gpt-image-edit")
    gateway.wait_config()
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (4, 4), "blue").save(buf, "PNG")
    blue = buf.getvalue()
    result = openai_client(gateway, s.secret).images.edit(
        model=s.model,
        prompt="make it red",
        image=[("a.png", blue, "image/png"), ("b.png", RED, "image/png")],
        mask=("m.png", RED, "image/png"),
    )
    assert base64.b64decode(result.data[0].b64_json) == blue  # the mock echoes the first image
    record = mock_upstream.requests()[-1]
    assert record["route"] == "/v1/images/edits"
    body = record["body"]
    assert body["prompt"] == "make it red" and body["model"] == "up-gpt-image-edit"
    assert [base64.b64decode(f["b64"]) for f in body["image"]] == [blue, RED]
    assert base64.b64decode(body["mask"]["b64"]) == RED


def test_generate_through_a_responses_upstream_with_the_image_tool(gateway, mock_upstream):
    s = setup(
        mock_upstream,
        "responses",
        "img-via-responses",
        [RuleSpec("image_enable_openai_generation_tool", config={"output_format": "png"})],
    )
    gateway.wait_config()
    result = openai_client(gateway, s.secret).images.generate(model=s.model, prompt="a red square")
    assert base64.b64decode(result.data[0].b64_json) == RED
    body = last_upstream_body(mock_upstream)
    assert body["tools"] == [{"type": "image_generation", "output_format": "png"}]


def test_without_the_tool_a_responses_upstream_gives_no_image(gateway, mock_upstream):
    """The previous test fails if the rule does nothing: this is what happens then."""
    s = setup(mock_upstream, "responses", "img-via-responses-no-tool")
    gateway.wait_config()
    with pytest.raises(openai.APIStatusError) as info:
        openai_client(gateway, s.secret).images.generate(model=s.model, prompt="a red square")
    assert info.value.status_code == 502 and info.value.body["code"] == "upstream_no_image"


def test_seed_flow_upstream_url_resolved_to_b64_json(gateway, mock_upstream):
    s = setup(mock_upstream, "openai_image", "img-seed", [RuleSpec("image_resolve_urls", phase="response")])
    gateway.wait_config()
    result = openai_client(gateway, s.secret).images.generate(
        model=s.model, prompt="a red square", response_format="url"
    )
    assert result.data[0].url is None
    assert base64.b64decode(result.data[0].b64_json) == RED
    assert mock_upstream.image_hits() == ["/_mock/images/red.png"]


def test_seed_flow_without_the_rule_keeps_the_url(gateway, mock_upstream):
    s = setup(mock_upstream, "openai_image", "img-seed-off")
    gateway.wait_config()
    result = openai_client(gateway, s.secret).images.generate(
        model=s.model, prompt="x", response_format="url"
    )
    assert result.data[0].url == mock_upstream.image_url("red.png") and result.data[0].b64_json is None


def _post(gateway, secret, path, **kw):
    return httpx.post(f"{gateway.url}{path}", headers={"authorization": f"Bearer {secret}"}, timeout=30, **kw)


def test_errors_in_openai_shape(gateway, mock_upstream):
    s = setup(mock_upstream, "openai_image", "img-errors")
    gateway.wait_config()
    cases = [
        ("/v1/images/generations", {"json": {"model": s.model}}, 400, "prompt"),
        ("/v1/images/generations", {"json": {"prompt": "x"}}, 400, "model"),
        ("/v1/images/generations", {"json": {"model": s.model, "prompt": "x", "n": 11}}, 400, "n"),
        (
            "/v1/images/generations",
            {"json": {"model": s.model, "prompt": "x", "stream": True}},
            400,
            "stream",
        ),
        ("/v1/images/generations", {"content": b"not json"}, 400, None),
        ("/v1/images/generations", {"json": {"model": "nope", "prompt": "x"}}, 404, None),
        ("/v1/images/edits", {"json": {"model": s.model, "prompt": "x"}}, 400, None),
        (
            "/v1/images/edits",
            {"data": {"model": s.model, "prompt": "x"}, "files": {"other": ("a.txt", b"x")}},
            400,
            "image",
        ),
    ]
    for path, kw, status, param in cases:
        r = _post(gateway, s.secret, path, **kw)
        assert r.status_code == status, (path, kw, r.text)
        err = r.json()["error"]
        assert err["message"] and err["type"]
        if param:
            assert err["param"] == param
    r = _post(gateway, "sk-wrong", "/v1/images/generations", json={"model": s.model, "prompt": "x"})
    assert r.status_code == 401 and r.json()["error"]["type"] == "authentication_error"


def test_multipart_body_over_the_limit_is_413(gateway, mock_upstream):
    s = setup(mock_upstream, "openai_image", "img-big")
    gateway.wait_config()
    r = _post(
        gateway,
        s.secret,
        "/v1/images/edits",
        data={"model": s.model, "prompt": "x"},
        files={"image": ("big.png", b"\x89PNG" + b"0" * (2 * 1024 * 1024), "image/png")},
    )
    assert r.status_code == 413 and r.json()["error"]["code"] == "request_too_large"
