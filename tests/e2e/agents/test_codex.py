"""Codex CLI (``codex exec``, Responses API) through the gateway: creates a file with its freeform
``apply_patch`` tool in two streamed turns, against a Chat Completions upstream (via paired
``field_custom_tools_to_function`` rules) and against a Responses upstream (pass-through)."""

from __future__ import annotations

import re

import orjson

from tests.e2e.agents.clients import run_codex
from tests.e2e.agents.scripted_upstream import FINAL_TEXT, AgentPlay
from tests.servers import make_key, make_route

MODEL = "gpt-5.5"  # Codex offers apply_patch only to models in its own catalogue
UPSTREAM_MODEL = "upstream-coder-1"
PATCH = ('*** Begin Patch\n*** Add File: hello.txt\n+Hello from the gateway!\n'
         '+quotes "kept", a \\ backslash and a tab\there\n*** End Patch\n')
CONTENT = 'Hello from the gateway!\nquotes "kept", a \\ backslash and a tab\there\n'
PLAY = AgentPlay(tool="apply_patch", arguments=PATCH, result_ok=re.compile(r"A hello\.txt"))


def _configure(agent_upstream, protocol: str):
    from gateway import config_version
    from transforms.models import TransformRule

    route = make_route(protocol, MODEL, f"{agent_upstream.url}/v1", upstream_model=UPSTREAM_MODEL)
    if protocol == "chat_completion":
        for position, phase in enumerate(("request", "response")):
            TransformRule.objects.create(scope="provider", provider=route.provider, position=position,
                                         transform="field_custom_tools_to_function", phase=phase,
                                         models=[MODEL], config={"names": ["*"]})
        config_version.bump()
    _, secret = make_key("codex")
    return route, secret


def _events(stdout: str) -> list[dict]:
    out = []
    for line in stdout.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                out.append(orjson.loads(line))
            except orjson.JSONDecodeError:
                pass
    return out


def _agent_requests(agent_upstream, path: str) -> list[dict]:
    """The upstream requests that offered apply_patch (the agent loop's turns), in order."""
    found = []
    for rec in agent_upstream.app.recorded():
        body = rec["body"] if isinstance(rec["body"], dict) else {}
        names = [(t.get("function") or {}).get("name") or t.get("name") for t in body.get("tools") or []]
        if rec["path"] == path and "apply_patch" in names:
            found.append(rec)
    return found


def _assert_credentials(agent_upstream, route, secret: str, header: str) -> None:
    for rec in agent_upstream.app.recorded():
        assert secret not in orjson.dumps(rec["headers"]).decode(), "the client key reached the upstream"
        assert rec["headers"].get(header) == (f"Bearer {route.upstream_key}" if header == "authorization"
                                              else route.upstream_key)
        assert rec["body"]["model"] == UPSTREAM_MODEL


def _run(agent_clis, gateway, secret, tmp_path):
    run = run_codex(agent_clis["codex"], base_url=f"{gateway.url}/v1", api_key=secret, model=MODEL,
                    prompt="Create hello.txt with the greeting, using apply_patch.", tmp=tmp_path)
    events = _events(run.stdout)
    assert run.returncode == 0, run.describe()
    messages = [e["item"].get("text") for e in events
                if e.get("type") == "item.completed" and (e.get("item") or {}).get("type") == "agent_message"]
    assert messages and messages[-1] == FINAL_TEXT, run.describe()
    assert any(e.get("type") == "turn.completed" for e in events), run.describe()
    changes = [e["item"] for e in events
               if e.get("type") == "item.completed" and (e.get("item") or {}).get("type") == "file_change"]
    assert changes and changes[0].get("status") == "completed", run.describe()
    assert (run.workdir / "hello.txt").read_text() == CONTENT
    return run


def test_codex_apply_patch_through_chat_completions_upstream(agent_clis, gateway, agent_upstream, tmp_path):
    route, secret = _configure(agent_upstream, "chat_completion")
    gateway.wait_config()
    agent_upstream.app.reset(PLAY)
    _run(agent_clis, gateway, secret, tmp_path)

    turns = _agent_requests(agent_upstream, "/v1/chat/completions")
    assert len(turns) == 2, [r["path"] for r in agent_upstream.app.recorded()]
    _assert_credentials(agent_upstream, route, secret, "authorization")
    first, second = turns[0]["body"], turns[1]["body"]
    assert first["stream"] is True and second["stream"] is True
    tool = next(t for t in first["tools"] if (t.get("function") or {}).get("name") == "apply_patch")
    assert tool["type"] == "function"
    params = tool["function"]["parameters"]
    assert params["required"] == ["input"] and params["properties"]["input"]["type"] == "string"
    assert all(t.get("type") == "function" for t in first["tools"]), first["tools"]
    assert "lark" not in orjson.dumps(first["tools"]).decode().lower()
    # second turn: the converted call in history, then its result
    calls = [c for m in second["messages"] if m.get("role") == "assistant" for c in m.get("tool_calls") or []]
    assert [c["id"] for c in calls] == [PLAY.call_id]
    assert calls[0]["type"] == "function" and calls[0]["function"]["name"] == "apply_patch"
    assert orjson.loads(calls[0]["function"]["arguments"]) == {"input": PATCH}
    results = [m for m in second["messages"] if m.get("role") == "tool"]
    assert [m["tool_call_id"] for m in results] == [PLAY.call_id]
    assert "hello.txt" in orjson.dumps(results[0]["content"]).decode()


def test_codex_apply_patch_through_responses_upstream(agent_clis, gateway, agent_upstream, tmp_path):
    route, secret = _configure(agent_upstream, "responses")
    gateway.wait_config()
    agent_upstream.app.reset(PLAY)
    _run(agent_clis, gateway, secret, tmp_path)

    turns = _agent_requests(agent_upstream, "/v1/responses")
    assert len(turns) == 2, [r["path"] for r in agent_upstream.app.recorded()]
    _assert_credentials(agent_upstream, route, secret, "authorization")
    first, second = turns[0]["body"], turns[1]["body"]
    tool = next(t for t in first["tools"] if t.get("name") == "apply_patch")
    assert tool["type"] == "custom" and tool["format"]["syntax"] == "lark"  # untouched
    calls = [i for i in second["input"] if i.get("type") == "custom_tool_call"]
    assert [(c["call_id"], c["name"], c["input"]) for c in calls] == [(PLAY.call_id, "apply_patch", PATCH)]
    outputs = [i for i in second["input"] if i.get("type") == "custom_tool_call_output"]
    assert [o["call_id"] for o in outputs] == [PLAY.call_id]
    assert "hello.txt" in orjson.dumps(outputs[0]["output"]).decode()
