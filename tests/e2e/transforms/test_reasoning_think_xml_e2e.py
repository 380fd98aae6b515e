"""Think XML in both directions through the real server, for each client protocol, stream and
non-stream, read by the official SDKs (``tests.e2e.sdk_turns``: the ``openai`` SDK for Chat
Completions and Responses, ``anthropic`` for Messages).

reasoning_from_think_xml: the upstream (scripted mock) answers ``<think>…</think>answer`` in its
visible text; with the API-key rule the client gets reasoning plus the clean answer, without it the
tags stay in the text (the control). The mock streams word by word, so the tags arrive glued to the
neighbouring words inside deltas; tags cut anywhere (one character per delta) are covered by the
unit and property tests.

reasoning_to_think_xml: the upstream reasons in plaintext (Chat-style ``reasoning`` content); with
the rule the client sees ``<think>…</think>`` at the start of the text and no reasoning.
"""

from __future__ import annotations

import pytest

from tests.e2e.sdk_turns import CONVERSATIONS
from tests.e2e.transforms.rules import RuleSpec, setup

CLIENTS = ["chat_completion", "responses", "messages"]
# A cross-protocol upstream for each client (plaintext reasoning needs a Chat upstream for
# reasoning_to_think_xml, so the Chat client's path there is same-protocol).
FROM_UPSTREAM = {"chat_completion": "messages", "responses": "chat_completion", "messages": "chat_completion"}
THOUGHT = "weighing the options carefully"
ANSWER = "The answer is 4."


@pytest.mark.parametrize("stream", [False, True], ids=["nonstream", "stream"])
@pytest.mark.parametrize("client", CLIENTS)
def test_from_think_xml(gateway, mock_upstream, client, stream):
    s = setup(
        mock_upstream,
        FROM_UPSTREAM[client],
        f"fxml-{client}-{stream}",
        [RuleSpec("reasoning_from_think_xml", "response", {"tag": "think"}, scope="api_key")],
    )
    gateway.wait_config()
    mock_upstream.script([{"text": f"Let me see. <think>{THOUGHT}</think>{ANSWER}"}])
    result = CONVERSATIONS[client](gateway.url, s.secret, s.model, stream=stream).ask("what is 2+2")
    assert "<think>" not in result.text and "</think>" not in result.text
    assert result.text.replace("\n\n", "") == f"Let me see. {ANSWER}"
    assert result.reasoning_text == THOUGHT


@pytest.mark.parametrize("stream", [False, True], ids=["nonstream", "stream"])
def test_from_think_xml_control_without_rule(gateway, mock_upstream, stream):
    s = setup(mock_upstream, "chat_completion", f"fxml-none-{stream}")
    gateway.wait_config()
    mock_upstream.script([{"text": f"<think>{THOUGHT}</think>{ANSWER}"}])
    result = CONVERSATIONS["responses"](gateway.url, s.secret, s.model, stream=stream).ask("what is 2+2")
    assert result.text == f"<think>{THOUGHT}</think>{ANSWER}" and result.reasoning_text == ""


TO_UPSTREAM = {
    "chat_completion": "chat_completion",
    "responses": "chat_completion",
    "messages": "chat_completion",
}


@pytest.mark.parametrize("stream", [False, True], ids=["nonstream", "stream"])
@pytest.mark.parametrize("client", CLIENTS)
def test_to_think_xml(gateway, mock_upstream, client, stream):
    s = setup(
        mock_upstream,
        TO_UPSTREAM[client],
        f"txml-{client}-{stream}",
        [RuleSpec("reasoning_to_think_xml", "response", {"tag": "think"}, scope="api_key")],
    )
    gateway.wait_config()
    mock_upstream.script([{"text": ANSWER, "reasoning": THOUGHT}])
    result = CONVERSATIONS[client](gateway.url, s.secret, s.model, stream=stream).ask("what is 2+2")
    assert result.text.replace("\n\n", "") == f"<think>{THOUGHT}</think>{ANSWER}"
    assert result.reasoning_text == ""


@pytest.mark.parametrize("stream", [False, True], ids=["nonstream", "stream"])
def test_to_think_xml_control_without_rule(gateway, mock_upstream, stream):
    s = setup(mock_upstream, "chat_completion", f"txml-none-{stream}")
    gateway.wait_config()
    mock_upstream.script([{"text": ANSWER, "reasoning": THOUGHT}])
    result = CONVERSATIONS["messages"](gateway.url, s.secret, s.model, stream=stream).ask("what is 2+2")
    assert result.text == ANSWER and result.reasoning_text == THOUGHT
