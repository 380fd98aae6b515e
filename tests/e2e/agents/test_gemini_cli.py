"""Gemini CLI (``gemini -p``, Gemini API ``streamGenerateContent?alt=sse``) through the gateway
(issue 19): it writes a file with its ``write_file`` tool in two turns (the call, then the tool
result and a final message) against a Chat Completions upstream, so both directions of the Gemini
client codec and a cross-protocol tool round trip are exercised by the real client."""

from __future__ import annotations

import re

import orjson
import pytest

from tests.e2e.agents.checks import agent_turns, assert_upstream_credentials
from tests.e2e.agents.clients import INSTALL_TIMEOUT, run_gemini
from tests.e2e.agents.scripted_upstream import FINAL_TEXT, AgentPlay
from tests.servers import make_key, make_route

pytestmark = pytest.mark.timeout(INSTALL_TIMEOUT + 300)  # the first test may install the CLIs

MODEL = "gemini-2.5-pro"  # passed with -m, so the CLI does not ask a routing model first
UPSTREAM_MODEL = "upstream-coder-1"
PROMPT = "Write hello.txt with the greeting."
CONTENT = 'Hello from Gemini CLI!\nquotes "kept", a \\ backslash, a tab\there and ünïcödé\n'


def test_gemini_cli_writes_a_file_through_a_chat_completions_upstream(
    agent_clis, gateway, agent_upstream, tmp_path
):
    route = make_route("chat_completion", MODEL, f"{agent_upstream.url}/v1", upstream_model=UPSTREAM_MODEL)
    _, secret = make_key("gemini-cli")
    gateway.wait_config()
    target = tmp_path / "work" / "hello.txt"
    play = AgentPlay(
        tool="write_file",
        arguments={"file_path": str(target), "content": CONTENT},
        result_ok=re.compile(r"(?i)success.*hello\.txt"),
    )
    agent_upstream.app.reset(play)
    since = gateway.log_size()
    run = run_gemini(
        agent_clis["gemini"], base_url=gateway.url, api_key=secret, model=MODEL, prompt=PROMPT, tmp=tmp_path
    )
    assert run.returncode == 0, run.describe()
    assert FINAL_TEXT in run.stdout, run.describe()
    assert target.read_text() == CONTENT

    log = gateway.log_tail(since)
    # two streamed calls, the colon percent-encoded by the CLI (the ASGI path is decoded)
    answered = re.findall(
        rf'"POST /v1beta/models/{re.escape(MODEL)}(?::|%3A)streamGenerateContent\?alt=sse HTTP/1\.1" 200', log
    )
    assert len(answered) == 2, log[-3000:]
    recorded = agent_upstream.app.recorded()
    assert_upstream_credentials(
        recorded,
        upstream_key=route.upstream_key,
        client_key=secret,
        upstream_model=UPSTREAM_MODEL,
        headers=("authorization",),
    )
    turns = agent_turns(recorded, "/v1/chat/completions", "write_file")
    assert len(turns) == 2, [r["path"] for r in recorded]
    first, second = turns[0]["body"], turns[1]["body"]
    write = next(t["function"] for t in first["tools"] if t["function"]["name"] == "write_file")
    assert {"file_path", "content"} <= set(write["parameters"]["properties"])
    calls = [c for m in second["messages"] if m.get("role") == "assistant" for c in m.get("tool_calls") or []]
    assert [c["function"]["name"] for c in calls] == ["write_file"]
    assert orjson.loads(calls[0]["function"]["arguments"]) == play.arguments
    results = [m for m in second["messages"] if m.get("role") == "tool"]
    assert len(results) == 1 and results[0]["tool_call_id"] == calls[0]["id"]
