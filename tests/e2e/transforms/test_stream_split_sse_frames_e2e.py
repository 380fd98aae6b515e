"""stream_split_sse_frames end to end, as an API-key rule, for each client protocol's stream
encoder (Messages and Responses clients over a Chat Completions upstream, a Chat Completions client
over a Messages upstream). The upstream's answer is one long token full of characters JSON must
escape (quotes, backslashes, non-ASCII), which the mock streams as a single delta.

We read the raw SSE bytes: with the rule every text-delta event's ``data:`` line fits the
configured limit (bytes, after JSON escaping) and the deltas still concatenate to the original;
the same request with a key without the rule carries one longer line (the control). The official
SDK then parses the split stream into the same text.
"""

from __future__ import annotations

from typing import Any

import httpx
import orjson
import pytest

from tests.e2e.transforms.rules import RuleSpec, anthropic_client, openai_client, setup
from tests.servers import make_key

LIMIT = 300  # above every protocol's empty delta wrapper (Chat chunks carry id, model, created...)
TOKEN = 'say:"hi"\\path→café;' * 40  # no whitespace: the mock streams it as a single delta
UPSTREAM = {"messages": "chat_completion", "responses": "chat_completion", "chat_completion": "messages"}
PATHS = {"messages": "/v1/messages", "responses": "/v1/responses", "chat_completion": "/v1/chat/completions"}


def _request_body(client: str, model: str) -> dict[str, Any]:
    if client == "messages":
        return {
            "model": model,
            "max_tokens": 256,
            "stream": True,
            "messages": [{"role": "user", "content": "talk"}],
        }
    if client == "responses":
        return {"model": model, "stream": True, "input": "talk"}
    return {"model": model, "stream": True, "messages": [{"role": "user", "content": "talk"}]}


def _text_delta(client: str, event: dict[str, Any]) -> str | None:
    """The text a streamed event adds, or None when it is not a text-delta event."""
    if client == "messages":
        delta = event.get("delta") or {}
        return delta.get("text") if event.get("type") == "content_block_delta" else None
    if client == "responses":
        return event.get("delta") if event.get("type") == "response.output_text.delta" else None
    choices = event.get("choices") or []
    return (choices[0].get("delta") or {}).get("content") if choices else None


def _stream(gateway, client: str, secret: str, model: str) -> list[tuple[bytes, str]]:
    """(raw ``data:`` line, its text delta) for every text-delta event of one streamed request."""
    headers = {"authorization": f"Bearer {secret}", "anthropic-version": "2023-06-01"}
    out = []
    with httpx.stream(
        "POST",
        f"{gateway.url}{PATHS[client]}",
        json=_request_body(client, model),
        headers=headers,
        timeout=30,
    ) as response:
        assert response.status_code == 200, response.read()
        for line in response.iter_lines():
            if not line.startswith("data: {"):
                continue
            text = _text_delta(client, orjson.loads(line[len("data: ") :]))
            if text:
                out.append((line.encode(), text))
    return out


def _sdk_text(gateway, client: str, secret: str, model: str) -> str:
    if client == "messages":
        with anthropic_client(gateway, secret).messages.stream(
            model=model, max_tokens=256, messages=[{"role": "user", "content": "talk"}]
        ) as stream:
            return stream.get_final_message().content[0].text
    if client == "responses":
        with openai_client(gateway, secret).responses.stream(model=model, input="talk") as stream:
            return stream.get_final_response().output_text
    with openai_client(gateway, secret).chat.completions.stream(
        model=model, messages=[{"role": "user", "content": "talk"}]
    ) as stream:
        return stream.get_final_completion().choices[0].message.content


@pytest.mark.parametrize("client", ["messages", "responses", "chat_completion"])
def test_api_key_rule_caps_every_delta_line(gateway, mock_upstream, client):
    s = setup(
        mock_upstream,
        UPSTREAM[client],
        f"ssf-{client}",
        [RuleSpec("stream_split_sse_frames", "response", {"max_frame_length": LIMIT}, scope="api_key")],
    )
    _, plain_secret = make_key("no-split")
    gateway.wait_config()

    mock_upstream.script([{"text": TOKEN}])
    deltas = _stream(gateway, client, s.secret, s.model)
    assert max(len(line) for line, _ in deltas) <= LIMIT
    assert "".join(text for _, text in deltas) == TOKEN
    assert len(deltas) >= 3

    mock_upstream.script([{"text": TOKEN}])
    control = _stream(gateway, client, plain_secret, s.model)
    assert [text for _, text in control] == [TOKEN]
    assert len(control[0][0]) > LIMIT

    mock_upstream.script([{"text": TOKEN}])
    assert _sdk_text(gateway, client, s.secret, s.model) == TOKEN


@pytest.mark.parametrize(
    ("provider_limit", "key_limit", "expected"),
    [(300, 1000, 300), (1000, 300, 1000)],
    ids=["provider-tighter", "key-tighter"],
)
def test_first_matching_rule_wins_provider_before_api_key(
    gateway, mock_upstream, provider_limit, key_limit, expected
):
    """Unlike ordinary rules (later ones see earlier output), the limit comes from the first
    matching rule in execution order: the provider's, even when the key asks for a tighter one."""
    s = setup(
        mock_upstream,
        "chat_completion",
        f"ssf-order-{provider_limit}",
        [
            RuleSpec("stream_split_sse_frames", "response", {"max_frame_length": provider_limit}),
            RuleSpec("stream_split_sse_frames", "response", {"max_frame_length": key_limit}, scope="api_key"),
        ],
    )
    gateway.wait_config()
    long_token = TOKEN * 2  # ~2 200 escaped bytes: split under both limits
    mock_upstream.script([{"text": long_token}])
    deltas = _stream(gateway, "messages", s.secret, s.model)
    assert "".join(text for _, text in deltas) == long_token
    longest = max(len(line) for line, _ in deltas)
    assert longest <= expected
    assert longest > expected - 20  # chunks are the largest that fit, so the limit in force is nearly reached
