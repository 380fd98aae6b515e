"""The other reasoning rules end to end through the real server, each on a cross-protocol path,
stream and non-stream, each with a control that shows the rule is what made the difference.

Response rules are read with the official SDKs (``openai`` / ``anthropic``); request rules are
checked on the body the mock upstream received. The mock reasons when the prompt contains
"think" (Chat upstream: plaintext ``reasoning`` content plus an encrypted entry; Responses: a
summary plus encrypted content; Messages: thinking, i.e. a summary, plus a signature).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.sdk_turns import CONVERSATIONS
from tests.e2e.transforms.rules import (
    RuleSpec,
    anthropic_client,
    last_upstream_body,
    openai_client,
    post_raw,
    setup,
)

PROMPT = "think about rain"
THOUGHT = f"Thinking about: {PROMPT}"
STREAMS = pytest.mark.parametrize("stream", [False, True], ids=["nonstream", "stream"])


def rules(
    type_id: str, phase: str = "response", config: dict | None = None, scope: str = "api_key"
) -> list[RuleSpec]:
    return [RuleSpec(type_id, phase, config or {}, scope=scope)]


def responses_reasoning(gateway, secret: str, model: str, stream: bool) -> list[Any]:
    """The reasoning items of a Responses answer, as the SDK ends with them."""
    client = openai_client(gateway, secret)
    if stream:
        with client.responses.stream(model=model, input=PROMPT) as s:
            response = s.get_final_response()
    else:
        response = client.responses.create(model=model, input=PROMPT)
    assert response.output_text == f"Echo: {PROMPT}"
    return [item for item in response.output if item.type == "reasoning"]


def chat_message_fields(gateway, secret: str, model: str, stream: bool) -> dict[str, Any]:
    """``reasoning_content`` and the reasoning detail types of a Chat answer, as the SDK parses them."""
    client = openai_client(gateway, secret)
    messages = [{"role": "user", "content": PROMPT}]
    if not stream:
        extra = (
            client.chat.completions.create(model=model, messages=messages).choices[0].message.model_extra
            or {}
        )
        return {
            "reasoning_content": extra.get("reasoning_content"),
            "details": [d["type"] for d in extra.get("reasoning_details") or []],
        }
    out: dict[str, Any] = {"reasoning_content": None, "details": []}
    for chunk in client.chat.completions.create(model=model, messages=messages, stream=True):
        for choice in chunk.choices:
            extra = choice.delta.model_extra or {}
            if extra.get("reasoning_content"):
                out["reasoning_content"] = (out["reasoning_content"] or "") + extra["reasoning_content"]
            out["details"] += [d["type"] for d in extra.get("reasoning_details") or []]
    return out


# -- response rules ------------------------------------------------------------------------------


@STREAMS
@pytest.mark.parametrize("with_rule", [True, False], ids=["rule", "control"])
def test_strip_output(gateway, mock_upstream, stream, with_rule):
    s = setup(
        mock_upstream,
        "chat_completion",
        f"rso-{stream}-{with_rule}",
        rules("reasoning_strip_output") if with_rule else [],
    )
    gateway.wait_config()
    result = CONVERSATIONS["messages"](gateway.url, s.secret, s.model, stream=stream).ask(PROMPT)
    assert result.text == f"Echo: {PROMPT}"
    if with_rule:
        assert result.reasoning_text == "" and result.reasoning_opaque == []
        assert [b.type for b in result.raw.content] == ["text"]
    else:
        assert result.reasoning_text == THOUGHT


@STREAMS
@pytest.mark.parametrize("with_rule", [True, False], ids=["rule", "control"])
def test_strip_encrypted(gateway, mock_upstream, stream, with_rule):
    s = setup(
        mock_upstream,
        "responses",
        f"rse-{stream}-{with_rule}",
        rules("reasoning_strip_encrypted") if with_rule else [],
    )
    gateway.wait_config()
    result = CONVERSATIONS["messages"](gateway.url, s.secret, s.model, stream=stream).ask(PROMPT)
    assert result.reasoning_text == THOUGHT
    assert (result.reasoning_opaque == []) is with_rule


@STREAMS
@pytest.mark.parametrize("with_rule", [True, False], ids=["rule", "control"])
def test_content_to_summary(gateway, mock_upstream, stream, with_rule):
    s = setup(
        mock_upstream,
        "chat_completion",
        f"rcs-{stream}-{with_rule}",
        rules("reasoning_content_to_summary") if with_rule else [],
    )
    gateway.wait_config()
    items = responses_reasoning(gateway, s.secret, s.model, stream)
    summary = "".join(p.text for item in items for p in item.summary or [])
    content = "".join(p.text for item in items for p in item.content or [])
    assert (summary, content) == ((THOUGHT, "") if with_rule else ("", THOUGHT))


@STREAMS
@pytest.mark.parametrize("with_rule", [True, False], ids=["rule", "control"])
def test_summary_heading(gateway, mock_upstream, stream, with_rule):
    s = setup(
        mock_upstream,
        "messages",
        f"rsh-{stream}-{with_rule}",
        rules("reasoning_summary_heading", config={"default_title": "Plan"}) if with_rule else [],
    )
    gateway.wait_config()
    items = responses_reasoning(gateway, s.secret, s.model, stream)
    summary = "".join(p.text for item in items for p in item.summary or [])
    assert summary == (f"**Plan**\n\n{THOUGHT}" if with_rule else THOUGHT)


@STREAMS
@pytest.mark.parametrize("with_rule", [True, False], ids=["rule", "control"])
def test_inject_content_field(gateway, mock_upstream, stream, with_rule):
    s = setup(
        mock_upstream,
        "responses",
        f"ric-{stream}-{with_rule}",
        rules("reasoning_inject_content_field") if with_rule else [],
    )
    gateway.wait_config()
    fields = chat_message_fields(gateway, s.secret, s.model, stream)
    assert fields["reasoning_content"] == (THOUGHT if with_rule else None)
    assert "reasoning.summary" in fields["details"]  # the normal fields stay


@STREAMS
@pytest.mark.parametrize("with_rule", [True, False], ids=["rule", "control"])
def test_summary_to_raw_cot(gateway, mock_upstream, stream, with_rule):
    s = setup(
        mock_upstream,
        "messages",
        f"rrc-{stream}-{with_rule}",
        rules("reasoning_summary_to_raw_cot") if with_rule else [],
    )
    gateway.wait_config()
    fields = chat_message_fields(gateway, s.secret, s.model, stream)
    assert fields["reasoning_content"] == (THOUGHT if with_rule else None)
    assert ("reasoning.summary" in fields["details"]) is not with_rule


# -- request rules -------------------------------------------------------------------------------


def consume(response) -> None:
    assert response.status_code == 200, response.text


@STREAMS
@pytest.mark.parametrize("with_rule", [True, False], ids=["rule", "control"])
def test_strip_input(gateway, mock_upstream, stream, with_rule):
    s = setup(
        mock_upstream,
        "chat_completion",
        f"rsi-{stream}-{with_rule}",
        rules("reasoning_strip_input", "request") if with_rule else [],
    )
    gateway.wait_config()
    history = [
        {"role": "user", "content": "hi"},
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [{"type": "summary_text", "text": "earlier thought"}],
            "encrypted_content": "enc",
        },
        {"role": "assistant", "content": "hello"},
        {"role": "user", "content": "again"},
    ]
    consume(
        post_raw(gateway, s.secret, "/v1/responses", {"model": s.model, "input": history, "stream": stream})
    )
    sent = [m for m in last_upstream_body(mock_upstream)["messages"] if m.get("reasoning_details")]
    assert (sent == []) is with_rule


@STREAMS
@pytest.mark.parametrize("with_rule", [True, False], ids=["rule", "control"])
def test_strip_config(gateway, mock_upstream, stream, with_rule):
    s = setup(
        mock_upstream,
        "messages",
        f"rsc-{stream}-{with_rule}",
        rules("reasoning_strip_config", "request") if with_rule else [],
    )
    gateway.wait_config()
    consume(
        post_raw(
            gateway,
            s.secret,
            "/v1/chat/completions",
            {
                "model": s.model,
                "reasoning_effort": "high",
                "max_completion_tokens": 8000,
                "stream": stream,
                "messages": [{"role": "user", "content": "hi"}],
            },
        )
    )
    assert ("thinking" not in last_upstream_body(mock_upstream)) is with_rule


@STREAMS
@pytest.mark.parametrize("with_rule", [True, False], ids=["rule", "control"])
def test_effort_to_budget(gateway, mock_upstream, stream, with_rule):
    config = {"low": 1024, "med": 2000, "high": 3000}
    s = setup(
        mock_upstream,
        "messages",
        f"reb-{stream}-{with_rule}",
        rules("reasoning_effort_to_budget", "request", config, scope="provider") if with_rule else [],
    )
    gateway.wait_config()
    consume(
        post_raw(
            gateway,
            s.secret,
            "/v1/chat/completions",
            {
                "model": s.model,
                "reasoning_effort": "medium",
                "max_completion_tokens": 8000,
                "stream": stream,
                "messages": [{"role": "user", "content": "hi"}],
            },
        )
    )
    thinking = last_upstream_body(mock_upstream)["thinking"]
    assert (thinking == {"type": "enabled", "budget_tokens": 2000}) is with_rule


@STREAMS
@pytest.mark.parametrize("with_rule", [True, False], ids=["rule", "control"])
def test_effort_to_model_suffix(gateway, mock_upstream, stream, with_rule):
    config = {"rules": [{"pattern": "up-*", "suffix": "-{effort}"}]}
    s = setup(
        mock_upstream,
        "responses",
        f"rems-{stream}-{with_rule}",
        rules("reasoning_effort_to_model_suffix", "request", config, scope="provider") if with_rule else [],
    )
    gateway.wait_config()
    client = openai_client(gateway, s.secret)
    kwargs: dict[str, Any] = {
        "model": s.model,
        "reasoning_effort": "high",
        "messages": [{"role": "user", "content": "hi"}],
    }
    if stream:
        model = [c.model for c in client.chat.completions.create(stream=True, **kwargs)][0]
    else:
        model = client.chat.completions.create(**kwargs).model
    assert model == s.model  # the client keeps seeing its logical model
    assert last_upstream_body(mock_upstream)["model"] == (
        f"up-{s.model}-high" if with_rule else f"up-{s.model}"
    )


@STREAMS
@pytest.mark.parametrize("with_rule", [True, False], ids=["rule", "control"])
def test_image_generation_minimal_to_low(gateway, mock_upstream, stream, with_rule):
    s = setup(
        mock_upstream,
        "responses",
        f"rimg-{stream}-{with_rule}",
        rules("reasoning_image_generation_minimal_to_low", "request") if with_rule else [],
    )
    gateway.wait_config()
    consume(
        post_raw(
            gateway,
            s.secret,
            "/v1/responses",
            {
                "model": s.model,
                "input": "draw",
                "stream": stream,
                "reasoning": {"effort": "minimal"},
                "tools": [{"type": "image_generation"}],
            },
        )
    )
    assert last_upstream_body(mock_upstream)["reasoning"]["effort"] == ("low" if with_rule else "minimal")


def test_anthropic_sdk_reads_stripped_stream(gateway, mock_upstream):
    """The Messages SDK's own stream accumulator over a stripped stream (lifecycle valid)."""
    s = setup(mock_upstream, "responses", "rso-sdk", rules("reasoning_strip_output"))
    gateway.wait_config()
    with anthropic_client(gateway, s.secret).messages.stream(
        model=s.model, max_tokens=256, messages=[{"role": "user", "content": PROMPT}]
    ) as stream:
        message = stream.get_final_message()
    assert [(b.type, getattr(b, "text", None)) for b in message.content] == [("text", f"Echo: {PROMPT}")]
