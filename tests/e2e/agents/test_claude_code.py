"""Claude Code (``claude -p``, Messages API, streaming) through the gateway: it writes a file with
its ``Write`` tool in two turns (the call, then the tool result and a final message), with the
key sent as ``x-api-key`` (``ANTHROPIC_API_KEY``) and as ``Authorization: Bearer``
(``ANTHROPIC_AUTH_TOKEN``), against a Chat Completions upstream and against a Messages upstream,
where the request must reach the upstream exactly as Claude Code sends it."""

from __future__ import annotations

import re

import orjson
import pytest

from tests.e2e.agents.checks import (
    ALWAYS,
    agent_turns,
    assert_upstream_credentials,
    first_difference,
    fresh_run_folder,
    masked,
)
from tests.e2e.agents.clients import INSTALL_TIMEOUT, AgentRun, run_claude
from tests.e2e.agents.scripted_upstream import FINAL_TEXT, AgentPlay
from tests.servers import make_key, make_route

pytestmark = pytest.mark.timeout(INSTALL_TIMEOUT + 300)  # the first test may install the CLIs

MODEL = "claude-sonnet-4-5"
SMALL_MODEL = "claude-haiku-4-5"  # Claude Code's "small fast" model; routed too, in case it is used
UPSTREAM_MODEL = "upstream-coder-1"
PROMPT = "Write hello.txt with the greeting."
CONTENT = 'Hello from Claude Code!\nquotes "kept", a \\ backslash, a tab\there and ünïcödé\n'
AUTH_MODES = ["x-api-key", "bearer"]

# Values that differ between two runs of the same task, whoever is in the middle.
VOLATILE = {
    "/model": ALWAYS,  # the gateway sends the channel's upstream model
    "/metadata/user_id": ALWAYS,  # device and session ids
}


def _configure(agent_upstream, protocol: str):
    from gateway import config_version
    from providers.models import ChannelModel

    route = make_route(protocol, MODEL, f"{agent_upstream.url}/v1", upstream_model=UPSTREAM_MODEL)
    ChannelModel.objects.create(channel=route.channel, model=SMALL_MODEL, upstream_model=UPSTREAM_MODEL)
    config_version.bump()
    _, secret = make_key("claude-code")
    return route, secret


def _play(tmp_path) -> AgentPlay:
    target = tmp_path / "work" / "hello.txt"
    return AgentPlay(
        tool="Write",
        arguments={"file_path": str(target), "content": CONTENT},
        result_ok=re.compile(r"(?i)created successfully.*hello\.txt"),
    )


def _run(agent_clis, base_url: str, secret: str, tmp_path, auth: str) -> AgentRun:
    """One ``claude -p`` run of the task; asserts exit 0, the final message and the file."""
    run = run_claude(
        agent_clis["claude"],
        base_url=base_url,
        api_key=secret,
        model=MODEL,
        small_model=SMALL_MODEL,
        prompt=PROMPT,
        tmp=tmp_path,
        auth=auth,
    )
    assert run.returncode == 0, run.describe()
    lines = run.stdout.strip().splitlines()
    result = orjson.loads(lines[-1]) if lines else {}
    assert result.get("type") == "result" and result.get("is_error") is False, run.describe()
    assert result.get("result") == FINAL_TEXT, run.describe()
    assert result.get("num_turns") == 2, run.describe()
    assert (run.workdir / "hello.txt").read_text() == CONTENT
    return run


def _assert_messages_query_accepted(gateway, since: int) -> None:
    """Claude Code posts to ``/v1/messages?beta=true``; the gateway's access log shows it answered 200."""
    log = gateway.log_tail(since)
    assert re.search(r'"POST /v1/messages\?beta=true HTTP/1\.1" 200', log), log[-3000:]


@pytest.mark.parametrize("auth", AUTH_MODES)
def test_claude_code_write_through_chat_completions_upstream(
    agent_clis, gateway, agent_upstream, tmp_path, auth
):
    route, secret = _configure(agent_upstream, "chat_completion")
    gateway.wait_config()
    play = _play(tmp_path)
    agent_upstream.app.reset(play)
    since = gateway.log_size()
    _run(agent_clis, gateway.url, secret, tmp_path, auth)
    _assert_messages_query_accepted(gateway, since)

    recorded = agent_upstream.app.recorded()
    assert {r["path"] for r in recorded} == {"/v1/chat/completions"}
    assert_upstream_credentials(
        recorded,
        upstream_key=route.upstream_key,
        client_key=secret,
        upstream_model=UPSTREAM_MODEL,
        headers=("authorization",),
    )
    turns = agent_turns(recorded, "/v1/chat/completions", "Write")
    assert len(turns) == 2, [r["path"] for r in recorded]
    first, second = turns[0]["body"], turns[1]["body"]
    assert first["stream"] is True and second["stream"] is True
    # the upstream streamed the call with its arguments in many small fragments
    assert turns[0]["tool_call"] and turns[0]["frames"] > 20 and not turns[1]["tool_call"]
    assert all(t.get("type") == "function" for t in first["tools"]), first["tools"]
    write = next(t["function"] for t in first["tools"] if t["function"]["name"] == "Write")
    assert {"file_path", "content"} <= set(write["parameters"]["properties"])
    assert first["messages"][0]["role"] == "system"
    assert PROMPT in orjson.dumps([m for m in first["messages"] if m["role"] == "user"]).decode()
    # second turn: the call in the history (arguments as Claude Code got them), then its result
    calls = [c for m in second["messages"] if m.get("role") == "assistant" for c in m.get("tool_calls") or []]
    assert [(c["id"], c["type"], c["function"]["name"]) for c in calls] == [
        (play.call_id, "function", "Write")
    ]
    assert orjson.loads(calls[0]["function"]["arguments"]) == play.arguments
    results = [m for m in second["messages"] if m.get("role") == "tool"]
    assert [m["tool_call_id"] for m in results] == [play.call_id]
    assert "File created successfully" in orjson.dumps(results[0]["content"]).decode()


@pytest.mark.parametrize("auth", AUTH_MODES)
def test_claude_code_write_through_messages_upstream_is_lossless(
    agent_clis, gateway, agent_upstream, tmp_path, auth
):
    route, secret = _configure(agent_upstream, "messages")
    gateway.wait_config()
    play = _play(tmp_path)

    agent_upstream.app.reset(play)  # 1. Claude Code straight to the scripted upstream
    _run(agent_clis, agent_upstream.url, secret, tmp_path, auth)
    direct_all = agent_upstream.app.recorded()
    assert {(r["path"], r["query"]) for r in direct_all} == {("/v1/messages", "beta=true")}
    direct = agent_turns(direct_all, "/v1/messages", "Write")

    fresh_run_folder(tmp_path, [tmp_path / "work" / "hello.txt"])
    agent_upstream.app.reset(play)  # 2. the same task through the gateway
    since = gateway.log_size()
    _run(agent_clis, gateway.url, secret, tmp_path, auth)
    _assert_messages_query_accepted(gateway, since)
    recorded = agent_upstream.app.recorded()
    assert_upstream_credentials(
        recorded,
        upstream_key=route.upstream_key,
        client_key=secret,
        upstream_model=UPSTREAM_MODEL,
        headers=("x-api-key",),
    )
    via = agent_turns(recorded, "/v1/messages", "Write")
    assert len(direct) == len(via) == 2
    assert via[0]["tool_call"] and via[0]["frames"] > 20 and not via[1]["tool_call"]

    for i, (a, b) in enumerate(zip(direct, via, strict=True)):
        diff = first_difference(masked(a["body"], VOLATILE), masked(b["body"], VOLATILE))
        assert diff is None, f"turn {i + 1}: the gateway changed Claude Code's request at {diff}"
    for rec in via:  # the beta features Claude Code asked for still reach the upstream
        assert rec["headers"].get("anthropic-beta") == direct[0]["headers"].get("anthropic-beta")
    first, second = via[0]["body"], via[1]["body"]
    for field in ("thinking", "context_management", "metadata", "system"):
        assert field in first, field
    assert "cache_control" in orjson.dumps(first["system"]).decode()
    uses = [
        b
        for m in second["messages"]
        if m["role"] == "assistant"
        for b in m["content"]
        if b["type"] == "tool_use"
    ]
    assert [(u["name"], u["input"]) for u in uses] == [("Write", play.arguments)]
    results = [b for b in second["messages"][-1]["content"] if b.get("type") == "tool_result"]
    assert [r["tool_use_id"] for r in results] == [uses[0]["id"]]
