"""cache_openai_tool_use end to end: an ``openai`` SDK Chat client's tool results reach a
Responses upstream (model gpt-5.6) with ``prompt_cache_breakpoint`` inside the newest
``function_call_output.output``; an older model or a Chat upstream gets none."""

from __future__ import annotations

from tests.e2e.transforms.rules import RuleSpec, last_upstream_body, openai_client, setup

TOOLS = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}]
MESSAGES = [
    {"role": "user", "content": "check both"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}},
            {"id": "b", "type": "function", "function": {"name": "f", "arguments": "{}"}},
        ],
    },
    {"role": "tool", "tool_call_id": "a", "content": "result a"},
    {"role": "tool", "tool_call_id": "b", "content": "result b"},
]


def outputs(body):
    return [i["output"] for i in body["input"] if i.get("type") == "function_call_output"]


def test_breakpoint_on_newest_result(gateway, mock_upstream):
    s = setup(
        mock_upstream, "responses", "cotu", [RuleSpec("cache_openai_tool_use")], upstream_model="gpt-5.6"
    )
    gateway.wait_config()
    reply = openai_client(gateway, s.secret).chat.completions.create(
        model=s.model, tools=TOOLS, messages=MESSAGES
    )
    assert reply.choices[0].message.content.startswith("Tool said:")
    assert outputs(last_upstream_body(mock_upstream)) == [
        "result a",
        [{"type": "input_text", "text": "result b", "prompt_cache_breakpoint": {"mode": "explicit"}}],
    ]


def test_older_model_and_chat_upstream_untouched(gateway, mock_upstream):
    s = setup(
        mock_upstream, "responses", "cotu-old", [RuleSpec("cache_openai_tool_use")], upstream_model="gpt-5.5"
    )
    gateway.wait_config()
    openai_client(gateway, s.secret).chat.completions.create(model=s.model, tools=TOOLS, messages=MESSAGES)
    assert outputs(last_upstream_body(mock_upstream)) == ["result a", "result b"]
    s = setup(
        mock_upstream,
        "chat_completion",
        "cotu-chat",
        [RuleSpec("cache_openai_tool_use")],
        upstream_model="gpt-5.6",
    )
    gateway.wait_config()
    openai_client(gateway, s.secret).chat.completions.create(model=s.model, tools=TOOLS, messages=MESSAGES)
    assert "prompt_cache_breakpoint" not in str(last_upstream_body(mock_upstream))
