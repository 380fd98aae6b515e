"""cache_anthropic_tool_use end to end: in an ``anthropic`` SDK tool loop the Messages upstream
receives ``cache_control`` on the trailing tool result only; a plain turn gets none."""

from __future__ import annotations

from tests.e2e.transforms.rules import RuleSpec, anthropic_client, last_upstream_body, setup

TOOLS = [{"name": "run", "description": "Run", "input_schema": {"type": "object", "properties": {}}}]


def test_trailing_tool_result_marked(gateway, mock_upstream):
    s = setup(mock_upstream, "messages", "catu", [RuleSpec("cache_anthropic_tool_use")])
    gateway.wait_config()
    client = anthropic_client(gateway, s.secret)
    client.messages.create(
        model=s.model, max_tokens=64, tools=TOOLS, messages=[{"role": "user", "content": "hi"}]
    )
    assert "cache_control" not in str(last_upstream_body(mock_upstream))
    reply = client.messages.create(
        model=s.model,
        max_tokens=64,
        tools=TOOLS,
        messages=[
            {"role": "user", "content": "run again"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "toolu_1", "name": "run", "input": {}}],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "done"}],
            },
        ],
    )
    assert reply.content[0].text == "Tool said: done"
    body = last_upstream_body(mock_upstream)
    assert body["messages"][-1]["content"] == [
        {
            "type": "tool_result",
            "tool_use_id": "toolu_1",
            "content": "done",
            "cache_control": {"type": "ephemeral"},
        }
    ]
    assert "cache_control" not in str(body["messages"][:-1])
