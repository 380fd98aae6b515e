"""image_resolve_urls end to end (request phase; the response phase is the Images API seed flow in
tests/e2e/test_images_api.py): an ``anthropic`` SDK Messages client sends an image URL served by
the mock; the Chat Completions upstream receives it inlined as a data URL. The gateway runs with
GATEWAY_FETCH_ALLOW_PRIVATE=1 (tests/conftest.py) since the mock is on loopback; a second gateway
without it shows the SSRF guard keeping the URL."""

from __future__ import annotations

from gateway.images.samples import PNG_RGB_8
from tests.e2e.transforms.rules import RuleSpec, anthropic_client, last_upstream_body, setup


def _send(gateway, s, url, stream=False):
    client = anthropic_client(gateway, s.secret)
    messages = [
        {
            "role": "user",
            "content": [
                {"type": "image", "source": {"type": "url", "url": url}},
                {"type": "text", "text": "describe"},
            ],
        }
    ]
    if stream:
        with client.messages.stream(model=s.model, max_tokens=64, messages=messages) as st:
            return st.get_final_message().content[0].text
    return client.messages.create(model=s.model, max_tokens=64, messages=messages).content[0].text


def _upstream_url(mock_upstream) -> str:
    content = last_upstream_body(mock_upstream)["messages"][0]["content"]
    return next(p for p in content if p["type"] == "image_url")["image_url"]["url"]


def test_request_image_url_is_inlined(gateway, mock_upstream):
    s = setup(mock_upstream, "chat_completion", "riu", [RuleSpec("image_resolve_urls")])
    gateway.wait_config()
    for stream in (False, True):
        assert _send(gateway, s, mock_upstream.image_url("red.png"), stream) == "Echo: describe"
        assert _upstream_url(mock_upstream) == f"data:image/png;base64,{PNG_RGB_8}"
    assert mock_upstream.image_hits() == ["/_mock/images/red.png"] * 2


def test_failed_fetch_keeps_the_url_and_the_request_succeeds(gateway, mock_upstream):
    s = setup(mock_upstream, "chat_completion", "riu-404", [RuleSpec("image_resolve_urls")])
    gateway.wait_config()
    url = mock_upstream.image_url("missing.png")
    assert _send(gateway, s, url) == "Echo: describe"
    assert _upstream_url(mock_upstream) == url


def test_ssrf_guard_keeps_loopback_urls(gateway_factory, mock_upstream):
    mock_upstream.reset()
    guarded = gateway_factory({"GATEWAY_FETCH_ALLOW_PRIVATE": "0"})
    s = setup(mock_upstream, "chat_completion", "riu-guard", [RuleSpec("image_resolve_urls")])
    guarded.wait_config()
    url = mock_upstream.image_url("red.png")
    assert _send(guarded, s, url) == "Echo: describe"
    assert _upstream_url(mock_upstream) == url
    assert mock_upstream.image_hits() == []
