"""Per-API-key reasoning envelopes end to end: one conversation alternates between a model served
by a Messages upstream and one served by a Responses upstream. With envelopes on, every opaque
reasoning payload the client holds is an ``mz2.`` envelope, every turn works, and each upstream
only ever receives the payloads it produced itself (the other provider's reasoning is dropped on
replay). Without envelopes (the control) the Messages upstream receives the Responses upstream's
encrypted content as a thinking signature, which a real Anthropic upstream would reject.
"""

from __future__ import annotations

import pytest

from gateway.mock_upstream.behaviour import signature_for
from tests.e2e.sdk_turns import CONVERSATIONS
from tests.e2e.test_reasoning import replayed_opaque
from tests.servers import make_key, make_route

TURNS = ["think about apples", "think about pears", "think about plums", "think about figs"]


def _run(
    gateway, mock_upstream, client: str, stream: bool, envelopes: bool
) -> list[tuple[str, list[str], set[str]]]:
    """(upstream protocol, payloads it received, payloads it produced so far) per turn."""
    tag = f"{client}-{int(stream)}-{int(envelopes)}"
    models = {"messages": f"env-m-{tag}", "responses": f"env-r-{tag}"}
    for protocol, model in models.items():
        make_route(protocol, model, mock_upstream.base_url(protocol), upstream_model=f"up-{model}")
    _, secret = make_key("envelopes", reasoning_envelopes=envelopes)
    gateway.wait_config()
    conversation = CONVERSATIONS[client](gateway.url, secret, models["messages"], stream=stream)
    produced: dict[str, set[str]] = {"messages": set(), "responses": set()}
    seen = []
    for i, prompt in enumerate(TURNS):
        protocol = "messages" if i % 2 == 0 else "responses"
        conversation.model = models[protocol]
        mock_upstream.clear()
        result = conversation.ask(prompt)
        assert result.text == f"Echo: {prompt}"
        assert result.reasoning_text == f"Thinking about: {prompt}"
        if envelopes:
            assert result.reasoning_opaque and all("mz2." in v for v in result.reasoning_opaque)
        body = mock_upstream.requests()[-1]["body"]
        seen.append((protocol, replayed_opaque(protocol, body), set(produced[protocol])))
        produced[protocol].add(signature_for(f"Thinking about: {prompt}"))
    return seen


@pytest.mark.parametrize("stream", [False, True], ids=["nonstream", "stream"])
@pytest.mark.parametrize("client", ["responses", "chat_completion", "messages"])
def test_each_upstream_only_gets_its_own_reasoning(gateway, mock_upstream, client, stream):
    turns = _run(gateway, mock_upstream, client, stream, envelopes=True)
    for protocol, received, own in turns:
        assert set(received) <= own, f"{protocol} upstream received another provider's payload"
    # the third and fourth turns replay the first and second turns' own payloads
    assert turns[2][1] == [signature_for("Thinking about: think about apples")]
    assert turns[3][1] == [signature_for("Thinking about: think about pears")]


def test_control_without_envelopes_leaks_foreign_payloads(gateway, mock_upstream):
    turns = _run(gateway, mock_upstream, "responses", False, envelopes=False)
    leaked = [received for protocol, received, own in turns if not set(received) <= own]
    assert leaked, "without envelopes the other upstream's payload is forwarded"
