"""The mock upstream speaks each public protocol well enough for the official SDKs to parse it,
streams included: checked here with the real ``openai`` and ``anthropic`` clients, no gateway."""

from __future__ import annotations

import json

import anthropic
import openai
import pytest

WEATHER_TOOL_CHAT = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather for a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
            "required": ["city"],
        },
    },
}
WEATHER_TOOL_RESPONSES = {
    "type": "function",
    "name": "get_weather",
    "description": "Weather for a city",
    "parameters": WEATHER_TOOL_CHAT["function"]["parameters"],
}
WEATHER_TOOL_MESSAGES = {
    "name": "get_weather",
    "description": "Weather for a city",
    "input_schema": WEATHER_TOOL_CHAT["function"]["parameters"],
}
EXPECTED_ARGS = {"city": "mock-city", "days": 1}


@pytest.fixture
def mock(mock_upstream):
    mock_upstream.reset()
    return mock_upstream


@pytest.fixture
def oai(mock):
    return openai.OpenAI(base_url=mock.url + "/v1", api_key="sk-mock-test", max_retries=0)


@pytest.fixture
def claude(mock):
    return anthropic.Anthropic(base_url=mock.url, api_key="sk-mock-test", max_retries=0)


def test_chat_non_stream_echo_model_and_usage(oai):
    completion = oai.chat.completions.create(
        model="mock-model-a", messages=[{"role": "user", "content": "hello there"}]
    )
    assert completion.choices[0].message.content == "Echo: hello there"
    assert completion.choices[0].finish_reason == "stop"
    assert completion.model == "mock-model-a"
    assert completion.usage.prompt_tokens > 0 and completion.usage.completion_tokens > 0
    assert (
        completion.usage.total_tokens == completion.usage.prompt_tokens + completion.usage.completion_tokens
    )


def test_chat_stream_tool_call_arguments_arrive_in_small_fragments(oai):
    chunks = list(
        oai.chat.completions.create(
            model="m",
            stream=True,
            stream_options={"include_usage": True},
            tools=[WEATHER_TOOL_CHAT],
            messages=[{"role": "user", "content": "please call get_weather now"}],
        )
    )
    assert chunks[0].choices[0].delta.role == "assistant"
    fragments = [
        tc.function.arguments
        for c in chunks
        if c.choices
        for tc in (c.choices[0].delta.tool_calls or [])
        if tc.function and tc.function.arguments
    ]
    assert len(fragments) > 3 and all(len(f) <= 3 for f in fragments)
    assert json.loads("".join(fragments)) == EXPECTED_ARGS
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finishes == ["tool_calls"]
    assert chunks[-1].choices == [] and chunks[-1].usage.total_tokens > 0


def test_chat_stream_helper_reassembles_two_parallel_calls(oai):
    tools = [
        WEATHER_TOOL_CHAT,
        {
            "type": "function",
            "function": {
                "name": "get_time",
                "parameters": {"type": "object", "properties": {"zone": {"type": "string"}}},
            },
        },
    ]
    with oai.chat.completions.stream(
        model="m", tools=tools, messages=[{"role": "user", "content": "call two tools"}]
    ) as stream:
        final = stream.get_final_completion()
    calls = final.choices[0].message.tool_calls
    assert [c.function.name for c in calls] == ["get_weather", "get_time"]
    assert json.loads(calls[1].function.arguments) == {"zone": "mock-zone"}
    assert calls[0].id != calls[1].id


def test_chat_without_include_usage_sends_no_usage_chunk(oai):
    chunks = list(
        oai.chat.completions.create(model="m", stream=True, messages=[{"role": "user", "content": "hi"}])
    )
    assert all(c.choices for c in chunks)
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "Echo: hi"


def test_chat_tool_result_is_answered(oai):
    completion = oai.chat.completions.create(
        model="m",
        tools=[WEATHER_TOOL_CHAT],
        messages=[
            {"role": "user", "content": "call get_weather"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": "{}"},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "sunny, 21C"},
        ],
    )
    assert completion.choices[0].message.content == "Tool said: sunny, 21C"


def test_chat_reasoning_when_effort_is_set(oai):
    completion = oai.chat.completions.create(
        model="m", reasoning_effort="high", messages=[{"role": "user", "content": "hello"}]
    )
    message = completion.choices[0].message.model_dump()
    details = message["reasoning_details"]
    assert details[0]["type"] == "reasoning.text" and details[0]["text"].startswith("Thinking about: hello")
    assert details[1]["type"] == "reasoning.encrypted" and details[1]["data"]
    assert completion.usage.completion_tokens_details.reasoning_tokens > 0


def test_responses_non_stream_echo(oai):
    response = oai.responses.create(model="mock-resp", input="hello responses")
    assert response.output_text == "Echo: hello responses"
    assert response.model == "mock-resp" and response.status == "completed"
    assert response.usage.input_tokens > 0 and response.usage.output_tokens > 0


def test_responses_stream_reasoning_and_tool_call(oai):
    events = list(
        oai.responses.create(
            model="m",
            input=[{"role": "user", "content": "call get_weather"}],
            tools=[WEATHER_TOOL_RESPONSES],
            reasoning={"effort": "low"},
            stream=True,
        )
    )
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert events[0].type == "response.created" and events[-1].type == "response.completed"
    deltas = [e.delta for e in events if e.type == "response.function_call_arguments.delta"]
    assert len(deltas) > 3 and json.loads("".join(deltas)) == EXPECTED_ARGS
    final = events[-1].response
    kinds = [item.type for item in final.output]
    assert kinds == ["reasoning", "function_call"]
    assert final.output[0].encrypted_content and final.output[0].summary[0].text.startswith("Thinking about")
    assert final.usage.output_tokens_details.reasoning_tokens > 0


def test_responses_stream_helper_and_custom_tool(oai):
    tools = [{"type": "custom", "name": "apply_patch", "description": "freeform"}]
    with oai.responses.stream(model="m", input="use a tool", tools=tools) as stream:
        final = stream.get_final_response()
    call = final.output[0]
    assert call.type == "custom_tool_call" and call.name == "apply_patch"
    assert call.input == "raw input for apply_patch"


def test_responses_tool_output_is_answered(oai):
    response = oai.responses.create(
        model="m",
        tools=[WEATHER_TOOL_RESPONSES],
        input=[
            {"role": "user", "content": "call get_weather"},
            {"type": "function_call", "call_id": "call_9", "name": "get_weather", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "call_9", "output": "rainy"},
        ],
    )
    assert response.output_text == "Tool said: rainy"


def test_messages_non_stream_thinking_and_text(claude):
    message = claude.messages.create(
        model="mock-claude",
        max_tokens=2048,
        thinking={"type": "enabled", "budget_tokens": 1024},
        messages=[{"role": "user", "content": "hello claude"}],
    )
    assert [b.type for b in message.content] == ["thinking", "text"]
    assert message.content[0].signature and message.content[1].text == "Echo: hello claude"
    assert message.model == "mock-claude" and message.stop_reason == "end_turn"
    assert message.usage.input_tokens > 0 and message.usage.output_tokens > 0


def test_messages_stream_tool_use_and_tool_result(claude):
    with claude.messages.stream(
        model="m",
        max_tokens=1024,
        tools=[WEATHER_TOOL_MESSAGES],
        messages=[{"role": "user", "content": "think, then call get_weather"}],
    ) as stream:
        final = stream.get_final_message()
    assert [b.type for b in final.content] == ["thinking", "tool_use"]
    tool_use = final.content[1]
    assert tool_use.name == "get_weather" and tool_use.input == EXPECTED_ARGS
    assert final.stop_reason == "tool_use" and final.usage.output_tokens > 0
    answer = claude.messages.create(
        model="m",
        max_tokens=1024,
        tools=[WEATHER_TOOL_MESSAGES],
        messages=[
            {"role": "user", "content": "call get_weather"},
            {"role": "assistant", "content": [b.model_dump() for b in final.content]},
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": tool_use.id, "content": "cloudy"}],
            },
        ],
    )
    assert answer.content[-1].text == "Tool said: cloudy"


def test_messages_raw_stream_splits_tool_input(claude):
    events = list(
        claude.messages.create(
            model="m",
            max_tokens=100,
            stream=True,
            tools=[WEATHER_TOOL_MESSAGES],
            messages=[{"role": "user", "content": "use a tool"}],
        )
    )
    assert events[0].type == "message_start" and events[-1].type == "message_stop"
    parts = [
        e.delta.partial_json
        for e in events
        if e.type == "content_block_delta" and e.delta.type == "input_json_delta" and e.delta.partial_json
    ]
    assert len(parts) > 3 and all(len(p) <= 3 for p in parts)
    assert events[-2].type == "message_delta" and events[-2].delta.stop_reason == "tool_use"
