"""stream_force end to end: the upstream call's mode follows the rule while each client still gets
the mode it asked for.

- ``enabled: true``: a non-streaming ``openai`` SDK Chat Completions client over an Anthropic
  Messages upstream; the upstream is called with ``stream: true`` and the gateway collects the
  stream (text, and a tool call whose arguments arrive in fragments) into one completion.
- ``enabled: false``: a streaming ``anthropic`` SDK Messages client over a Chat Completions
  upstream; the upstream is called without streaming and the client still gets a valid stream.
"""

from __future__ import annotations

import json

from tests.e2e.transforms.rules import RuleSpec, anthropic_client, openai_client, setup, upstream_bodies

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}


def test_forced_stream_is_collected_for_a_non_streaming_client(gateway, mock_upstream):
    s = setup(mock_upstream, "messages", "sf-on", [RuleSpec("stream_force", config={"enabled": True})])
    gateway.wait_config()
    client = openai_client(gateway, s.secret)

    reply = client.chat.completions.create(
        model=s.model, messages=[{"role": "user", "content": "hello there friend"}]
    )
    assert reply.object == "chat.completion"
    assert reply.choices[0].message.content == "Echo: hello there friend"
    assert reply.choices[0].finish_reason == "stop"
    assert reply.usage.completion_tokens > 0

    reply = client.chat.completions.create(
        model=s.model, tools=[WEATHER], messages=[{"role": "user", "content": "please call get_weather"}]
    )
    call = reply.choices[0].message.tool_calls[0]
    assert call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": "mock-city"}
    assert reply.choices[0].finish_reason == "tool_calls"

    assert [body["stream"] for body in upstream_bodies(mock_upstream)] == [True, True]


def test_disabled_stream_is_replayed_as_a_stream_for_a_streaming_client(gateway, mock_upstream):
    s = setup(
        mock_upstream, "chat_completion", "sf-off", [RuleSpec("stream_force", config={"enabled": False})]
    )
    gateway.wait_config()
    deltas: list[str] = []
    with anthropic_client(gateway, s.secret).messages.stream(
        model=s.model, max_tokens=64, messages=[{"role": "user", "content": "hello there friend"}]
    ) as stream:
        for text in stream.text_stream:
            deltas.append(text)
        final = stream.get_final_message()
    assert "".join(deltas) == "Echo: hello there friend"
    assert final.content[0].text == "Echo: hello there friend"
    assert final.stop_reason == "end_turn"
    assert [bool(body.get("stream")) for body in upstream_bodies(mock_upstream)] == [False]


def test_forced_stream_switches_the_gemini_endpoint(gateway, mock_upstream):
    """For Gemini the mode is in the URL: a forced stream must call ``:streamGenerateContent``
    with ``alt=sse`` (a non-streaming ``openai`` SDK Responses client still gets one response)."""
    s = setup(mock_upstream, "gemini", "sf-gemini", [RuleSpec("stream_force", config={"enabled": True})])
    gateway.wait_config()
    reply = openai_client(gateway, s.secret).responses.create(model=s.model, input="hello gemini")
    assert reply.output_text == "Echo: hello gemini"
    assert reply.status == "completed"
    record = mock_upstream.requests()[-1]
    assert record["route"] == f"/v1beta/models/up-{s.model}:streamGenerateContent"
    assert "alt=sse" in record["query"]
