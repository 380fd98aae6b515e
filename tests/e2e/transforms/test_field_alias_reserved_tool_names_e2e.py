"""field_alias_reserved_tool_names end to end: an ``openai`` SDK Chat Completions client declares a
function named ``view_image`` (a name some upstreams reserve for a hosted tool); the provider's
upstream speaks Anthropic Messages. The request rule must send ``client_view_image`` upstream
(declaration and history), and the response rule must hand the client its own name back, for a
whole response and for a stream.
"""

from __future__ import annotations

import json

import pytest

from tests.e2e.sdk_turns import CONVERSATIONS, WEATHER_ARGS
from tests.e2e.transforms.rules import RuleSpec, last_upstream_body, openai_client, setup

ALIASES = {"aliases": {"view_image": "client_view_image"}}
VIEW_IMAGE = {
    "type": "function",
    "function": {
        "name": "view_image",
        "description": "Show an image to the model",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    },
}
RULES = [
    RuleSpec("field_alias_reserved_tool_names", "request", ALIASES),
    RuleSpec("field_alias_reserved_tool_names", "response", ALIASES),
]


def _tool_use_names(body: dict) -> list[str]:
    return [
        block["name"]
        for message in body["messages"]
        if isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "tool_use"
    ]


@pytest.mark.parametrize("stream", [False, True], ids=["nonstream", "stream"])
def test_reserved_name_is_aliased_upstream_and_restored_for_the_client(gateway, mock_upstream, stream):
    s = setup(mock_upstream, "messages", f"alias-{int(stream)}", RULES)
    gateway.wait_config()
    client = openai_client(gateway, s.secret)
    messages = [{"role": "user", "content": "please use a tool"}]

    if stream:
        name, args, call_id = "", "", ""
        for chunk in client.chat.completions.create(
            model=s.model, messages=messages, tools=[VIEW_IMAGE], stream=True
        ):
            for delta in chunk.choices[0].delta.tool_calls or [] if chunk.choices else []:
                name += delta.function.name or "" if delta.function else ""
                args += delta.function.arguments or "" if delta.function else ""
                call_id = delta.id or call_id
    else:
        reply = client.chat.completions.create(model=s.model, messages=messages, tools=[VIEW_IMAGE])
        call = reply.choices[0].message.tool_calls[0]
        name, args, call_id = call.function.name, call.function.arguments, call.id
    assert name == "view_image", "the response rule must restore the client's tool name"
    assert json.loads(args) == {"path": "mock-path"}

    body = last_upstream_body(mock_upstream)
    assert [tool["name"] for tool in body["tools"]] == ["client_view_image"]
    assert '"view_image"' not in json.dumps(body)

    # The next turn replays the call in history: it must go upstream under the alias too.
    history = messages + [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": call_id, "type": "function", "function": {"name": "view_image", "arguments": args}}
            ],
        },
        {"role": "tool", "tool_call_id": call_id, "content": "a red square"},
    ]
    final = client.chat.completions.create(model=s.model, messages=history, tools=[VIEW_IMAGE])
    assert final.choices[0].message.content == "Tool said: a red square"
    body = last_upstream_body(mock_upstream)
    assert _tool_use_names(body) == ["client_view_image"]
    assert [tool["name"] for tool in body["tools"]] == ["client_view_image"]


def test_names_outside_the_map_are_untouched(gateway, mock_upstream):
    s = setup(mock_upstream, "messages", "alias-other", RULES)
    gateway.wait_config()
    other = {
        "type": "function",
        "function": {
            "name": "read_file",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
            },
        },
    }
    reply = openai_client(gateway, s.secret).chat.completions.create(
        model=s.model,
        messages=[{"role": "user", "content": "please call read_file"}],
        tools=[VIEW_IMAGE, other],
    )
    assert reply.choices[0].message.tool_calls[0].function.name == "read_file"
    assert [tool["name"] for tool in last_upstream_body(mock_upstream)["tools"]] == [
        "client_view_image",
        "read_file",
    ]


@pytest.mark.parametrize("stream", [False, True], ids=["nonstream", "stream"])
@pytest.mark.parametrize(
    ("client", "upstream"),
    [("responses", "gemini"), ("messages", "chat_completion"), ("chat_completion", "responses")],
)
def test_round_trip_through_every_client_encoder(gateway, mock_upstream, client, upstream, stream):
    """A call round trip through each client protocol's SDK (stream and not): the upstream only
    ever sees the alias (declaration, replayed call), the client only its own name."""
    aliases = {"aliases": {"get_weather": "client_get_weather"}}
    s = setup(
        mock_upstream,
        upstream,
        f"alias-{client}-{upstream}-{int(stream)}",
        [
            RuleSpec("field_alias_reserved_tool_names", "request", aliases),
            RuleSpec("field_alias_reserved_tool_names", "response", aliases),
        ],
    )
    gateway.wait_config()
    agent = CONVERSATIONS[client](gateway.url, s.secret, s.model, stream=stream, tools=("get_weather",))
    turn = agent.ask("please use a tool")
    assert [(c.name, c.arguments) for c in turn.tool_calls] == [("get_weather", WEATHER_ARGS)]
    final = agent.answer_tools({turn.tool_calls[0].call_id: "sunny"})
    assert final.text == "Tool said: sunny"
    bodies = [json.dumps(record["body"]) for record in mock_upstream.requests()]
    assert len(bodies) == 2
    for body in bodies:
        assert '"client_get_weather"' in body
        assert '"get_weather"' not in body
