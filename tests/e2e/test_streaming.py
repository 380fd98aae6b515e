"""Streams stay incremental end to end: the client sees the first text delta while the upstream
is still streaming (the mock paces its frames through a channel extra header and reports its
in-flight requests), for every client protocol × upstream protocol. A gateway that buffered the
upstream stream would only show the first delta after the upstream request had finished."""

from __future__ import annotations

import anthropic
import openai
import pytest

from tests.e2e.test_matrix import CLIENTS, UPSTREAMS
from tests.servers import make_key, make_route

PROMPT = "stream these words one by one please"


def first_delta_then_rest(client: str, base_url: str, secret: str, model: str, on_first) -> str:
    """Stream one answer with the client's SDK, calling ``on_first()`` at the first text delta;
    returns the whole text."""
    text = ""
    if client == "chat_completion":
        sdk = openai.OpenAI(base_url=base_url + "/v1", api_key=secret, max_retries=0)
        for chunk in sdk.chat.completions.create(
            model=model, stream=True, messages=[{"role": "user", "content": PROMPT}]
        ):
            piece = chunk.choices[0].delta.content if chunk.choices else None
            if piece:
                if not text:
                    on_first()
                text += piece
    elif client == "responses":
        sdk = openai.OpenAI(base_url=base_url + "/v1", api_key=secret, max_retries=0)
        for event in sdk.responses.create(model=model, input=PROMPT, stream=True):
            if event.type == "response.output_text.delta" and event.delta:
                if not text:
                    on_first()
                text += event.delta
    else:
        sdk = anthropic.Anthropic(base_url=base_url, api_key=secret, max_retries=0)
        for event in sdk.messages.create(
            model=model, max_tokens=256, stream=True, messages=[{"role": "user", "content": PROMPT}]
        ):
            if event.type == "content_block_delta" and event.delta.type == "text_delta" and event.delta.text:
                if not text:
                    on_first()
                text += event.delta.text
    return text


@pytest.mark.parametrize("upstream", UPSTREAMS)
@pytest.mark.parametrize("client", CLIENTS)
def test_first_delta_arrives_while_upstream_still_streams(gateway, mock_upstream, client, upstream):
    model = f"e2e-slow-{upstream}"
    make_route(
        upstream,
        model,
        mock_upstream.base_url(upstream),
        upstream_model=f"up-slow-{upstream}",
        extra_headers={"x-mock-frame-delay": "0.1"},
    )
    _, secret = make_key()
    gateway.wait_config()
    upstream_busy_at_first_delta: list[int] = []

    def on_first() -> None:
        upstream_busy_at_first_delta.append(mock_upstream.stats()["in_flight"])

    text = first_delta_then_rest(client, gateway.url, secret, model, on_first)
    assert text == f"Echo: {PROMPT}"
    assert upstream_busy_at_first_delta == [1], (
        "the first delta must reach the client before the upstream finishes"
    )
    record = mock_upstream.requests()[-1]
    assert record["headers"].get("x-mock-frame-delay") == "0.1"  # the channel's extra header was sent
