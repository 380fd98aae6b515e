"""Reasoning end to end, in all 32 cells (4 clients x 4 upstreams x stream or not): when the upstream thinks (the mock does when the text
contains "think"), the client sees the reasoning text and its opaque payload (signature /
encrypted content) in its own protocol's form; replaying that history on the next turn works;
and when client and upstream speak the same protocol, the upstream gets its own opaque payload
back byte for byte (a signature that does not survive the trip breaks real multi-turn thinking).
"""

from __future__ import annotations

import pytest

from gateway.mock_upstream.behaviour import signature_for
from tests.e2e.sdk_turns import CONVERSATIONS
from tests.e2e.test_matrix import CLIENTS, UPSTREAMS
from tests.servers import make_key, make_route

PROMPT = "think about the weather"
REASONING = f"Thinking about: {PROMPT}"  # what the mock upstream reasons


def replayed_opaque(protocol: str, body: dict) -> list[str]:
    """The opaque reasoning payloads found in the history of an upstream request body."""
    found: list[str] = []
    if protocol == "messages":
        for message in body.get("messages", []):
            for block in message.get("content") if isinstance(message.get("content"), list) else []:
                if block.get("type") == "thinking" and block.get("signature"):
                    found.append(block["signature"])
    elif protocol == "responses":
        for item in body.get("input", []) if isinstance(body.get("input"), list) else []:
            if item.get("type") == "reasoning" and item.get("encrypted_content"):
                found.append(item["encrypted_content"])
    elif protocol == "gemini":
        for content in body.get("contents", []):
            for part in content.get("parts") or []:
                if part.get("thought") and part.get("thoughtSignature"):
                    found.append(part["thoughtSignature"])
    elif protocol == "chat_completion":
        for message in body.get("messages", []):
            for entry in message.get("reasoning_details") or []:
                if entry.get("type") == "reasoning.encrypted" and entry.get("data"):
                    found.append(entry["data"])
                elif entry.get("signature"):
                    found.append(entry["signature"])
    return found


@pytest.mark.parametrize("stream", [False, True], ids=["nonstream", "stream"])
@pytest.mark.parametrize("upstream", UPSTREAMS)
@pytest.mark.parametrize("client", CLIENTS)
def test_reasoning_reaches_the_client_and_replays(gateway, mock_upstream, client, upstream, stream):
    model = f"e2e-think-{upstream}"
    make_route(upstream, model, mock_upstream.base_url(upstream), upstream_model=f"up-think-{upstream}")
    _, secret = make_key()
    gateway.wait_config()
    conversation = CONVERSATIONS[client](gateway.url, secret, model, stream=stream)

    first = conversation.ask(PROMPT)
    assert first.text == f"Echo: {PROMPT}"
    assert first.reasoning_text == REASONING
    assert first.reasoning_opaque, "the reasoning's signature / encrypted payload must reach the client"

    second = conversation.ask("and now?")
    assert second.text == "Echo: and now?"
    if client == upstream:
        records = mock_upstream.requests()
        assert replayed_opaque(upstream, records[-1]["body"]) == [signature_for(REASONING)], (
            "same-protocol replay must hand the upstream its own opaque reasoning payload unchanged"
        )


@pytest.mark.parametrize("stream", [False, True], ids=["nonstream", "stream"])
def test_chat_reasoning_details_reach_an_anthropic_client_as_one_thinking_block(
    gateway, mock_upstream, stream
):
    """Issue 19: a Chat upstream's ``reasoning.text`` + ``reasoning.encrypted`` entries used to
    become two thinking blocks (text with an empty signature, then an empty one with the
    signature); Claude clients expect one block with both."""
    import anthropic

    make_route("chat_completion", "e2e-think-one-block", mock_upstream.base_url("chat_completion"))
    _, secret = make_key()
    gateway.wait_config()
    client = anthropic.Anthropic(base_url=gateway.url, api_key=secret, max_retries=0)
    kwargs = {
        "model": "e2e-think-one-block",
        "max_tokens": 256,
        "messages": [{"role": "user", "content": PROMPT}],
    }
    if stream:
        with client.messages.stream(**kwargs) as s:
            message = s.get_final_message()
    else:
        message = client.messages.create(**kwargs)
    thinking = [b for b in message.content if b.type in ("thinking", "redacted_thinking")]
    assert len(thinking) == 1, message.content
    assert thinking[0].thinking == REASONING and thinking[0].signature
    assert signature_for(REASONING) in thinking[0].signature
