"""A scripted multi-step agent loop through the gateway (``POST /_mock/script``): two tool steps,
then a final answer, for each client protocol, stream and not, against a Responses upstream."""

from __future__ import annotations

import pytest

from tests.e2e.sdk_turns import CONVERSATIONS
from tests.e2e.test_matrix import CLIENTS
from tests.servers import make_key, make_route

SCRIPT = [
    {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]},
    {"tool_calls": [{"name": "get_time", "arguments": {"zone": "CET"}}]},
    {"text": "Paris is sunny at noon."},
]


@pytest.mark.parametrize("stream", [False, True], ids=["nonstream", "stream"])
@pytest.mark.parametrize("client", CLIENTS)
def test_scripted_agent_loop(gateway, mock_upstream, client, stream):
    make_route("responses", "e2e-agent", mock_upstream.base_url("responses"), upstream_model="up-agent")
    _, secret = make_key()
    gateway.wait_config()
    mock_upstream.script(SCRIPT)
    agent = CONVERSATIONS[client](
        gateway.url, secret, "e2e-agent", stream=stream, tools=("get_weather", "get_time")
    )

    step = agent.ask("plan my afternoon")
    assert [(c.name, c.arguments) for c in step.tool_calls] == [("get_weather", {"city": "Paris"})]
    step = agent.answer_tools({step.tool_calls[0].call_id: "sunny"})
    assert [(c.name, c.arguments) for c in step.tool_calls] == [("get_time", {"zone": "CET"})]
    step = agent.answer_tools({step.tool_calls[0].call_id: "12:00"})
    assert step.text == "Paris is sunny at noon." and step.tool_calls == []

    last = mock_upstream.requests()[-1]["body"]["input"]
    outputs = [item["output"] for item in last if item.get("type") == "function_call_output"]
    calls = [item["name"] for item in last if item.get("type") == "function_call"]
    assert calls == ["get_weather", "get_time"] and outputs == ["sunny", "12:00"]
    assert mock_upstream.stats()["script_remaining"] == 0
