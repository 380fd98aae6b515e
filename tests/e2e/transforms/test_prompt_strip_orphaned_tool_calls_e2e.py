"""prompt_strip_orphaned_tool_calls end to end: an ``openai`` SDK Chat Completions client sends a
history whose last assistant turn holds a tool call that never got a result (a truncated
conversation); the provider's upstream speaks Anthropic Messages, which rejects a ``tool_use``
without its ``tool_result``. Without the rule the gateway forwards such a trailing call (the
conversation may be waiting on it); with it the call is dropped, while an answered call stays.
"""

from __future__ import annotations

from tests.e2e.transforms.rules import RuleSpec, last_upstream_body, openai_client, setup

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
HISTORY = [
    {"role": "user", "content": "weather twice please"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_answered",
                "type": "function",
                "function": {"name": "get_weather", "arguments": "{}"},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_answered", "content": "sunny"},
    {
        "role": "assistant",
        "content": "Let me check again.",
        "tool_calls": [
            {"id": "call_orphan", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}
        ],
    },
]


def _blocks(body: dict, kind: str) -> list[str]:
    return [
        block.get("id") or block.get("tool_use_id")
        for message in body["messages"]
        for block in message["content"]
        if block["type"] == kind
    ]


def test_unanswered_call_is_removed(gateway, mock_upstream):
    s = setup(mock_upstream, "messages", "psotc", [RuleSpec("prompt_strip_orphaned_tool_calls")])
    gateway.wait_config()
    openai_client(gateway, s.secret).chat.completions.create(model=s.model, messages=HISTORY, tools=TOOLS)
    body = last_upstream_body(mock_upstream)
    assert _blocks(body, "tool_use") == ["call_answered"]
    assert _blocks(body, "tool_result") == ["call_answered"]
    assert body["messages"][-1] == {
        "role": "assistant",
        "content": [{"type": "text", "text": "Let me check again."}],
    }


def test_without_the_rule_the_trailing_call_is_forwarded(gateway, mock_upstream):
    """The control: the per-attempt clean-up alone keeps a trailing call, so the test above
    really measures the rule."""
    s = setup(mock_upstream, "messages", "psotc-none")
    gateway.wait_config()
    openai_client(gateway, s.secret).chat.completions.create(model=s.model, messages=HISTORY, tools=TOOLS)
    assert _blocks(last_upstream_body(mock_upstream), "tool_use") == ["call_answered", "call_orphan"]
