"""Codex CLI (``codex exec --json``, Responses API, streaming) through the gateway: it creates a
file with its freeform ``apply_patch`` tool in two turns (the call, then the tool result and a
final message), against a Chat Completions upstream through paired
``field_custom_tools_to_function`` rules (``names: ["*"]``), and against a Responses upstream,
where the request must reach the upstream exactly as Codex sends it."""

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
from tests.e2e.agents.clients import INSTALL_TIMEOUT, AgentRun, run_codex
from tests.e2e.agents.scripted_upstream import FINAL_TEXT, AgentPlay
from tests.servers import make_key, make_route

pytestmark = pytest.mark.timeout(INSTALL_TIMEOUT + 300)  # the first test may install the CLIs

MODEL = "gpt-5.5"  # Codex offers apply_patch only to model names in its own catalogue
UPSTREAM_MODEL = "upstream-coder-1"
PROMPT = "Create hello.txt with the greeting, using apply_patch."
PATCH = (
    "*** Begin Patch\n*** Add File: hello.txt\n+Hello from the gateway!\n"
    '+quotes "kept", a \\ backslash, a tab\there and ünïcödé\n*** End Patch\n'
)
CONTENT = 'Hello from the gateway!\nquotes "kept", a \\ backslash, a tab\there and ünïcödé\n'
PLAY = AgentPlay(tool="apply_patch", arguments=PATCH, result_ok=re.compile(r"A hello\.txt"))

# Values that differ between two runs of the same task, whoever is in the middle.
VOLATILE = {
    "/model": ALWAYS,  # the gateway sends the channel's upstream model
    "/prompt_cache_key": ALWAYS,  # Codex's session id
    "/client_metadata": ALWAYS,  # session, thread and turn ids
    "/input/*/id": ALWAYS,  # item ids Codex generates per run
}
KNOWN_LOSSES = {
    # The gateway's Responses stream does not keep unknown keys of a custom_tool_call output item
    # (the scripted upstream adds ``status``, which the public ResponseCustomToolCall type does
    # not have), so Codex cannot replay it: a known, harmless difference of the stream decoder.
    "/input/*/status": lambda item: item.get("type") == "custom_tool_call",
}


def _configure(agent_upstream, protocol: str, model: str = MODEL):
    from gateway import config_version
    from transforms.models import TransformRule

    # Responses upstream: let Codex's top-level ``client_metadata`` through the extra-field whitelist.
    fields = {"extra_fields_whitelist": ["client_metadata"]} if protocol == "responses" else {}
    route = make_route(protocol, model, f"{agent_upstream.url}/v1", upstream_model=UPSTREAM_MODEL, **fields)
    if protocol == "chat_completion":
        for position, phase in enumerate(("request", "response")):
            TransformRule.objects.create(
                scope="provider",
                provider=route.provider,
                position=position,
                transform="field_custom_tools_to_function",
                phase=phase,
                models=[model],
                config={"names": ["*"]},
            )
        config_version.bump()
    _, secret = make_key("codex")
    return route, secret


def _events(stdout: str) -> list[dict]:
    out = []
    for line in stdout.splitlines():
        if line.startswith("{"):
            try:
                out.append(orjson.loads(line))
            except orjson.JSONDecodeError:
                pass
    return out


def _run(agent_clis, base_url: str, secret: str, tmp_path, model: str = MODEL, **codex: str) -> AgentRun:
    """One ``codex exec`` run of the task; asserts exit 0, the final message and the file.
    ``codex``: more ``run_codex`` settings (the provider's auth, extra provider lines)."""
    run = run_codex(
        agent_clis["codex"],
        base_url=base_url,
        api_key=secret,
        model=model,
        prompt=PROMPT,
        tmp=tmp_path,
        **codex,
    )
    assert run.returncode == 0, run.describe()
    events = _events(run.stdout)
    items = [
        e["item"] for e in events if e.get("type") == "item.completed" and isinstance(e.get("item"), dict)
    ]
    messages = [i.get("text") for i in items if i.get("type") == "agent_message"]
    assert messages and messages[-1] == FINAL_TEXT, run.describe()
    changes = [i for i in items if i.get("type") == "file_change"]
    assert [c.get("status") for c in changes] == ["completed"], run.describe()
    assert [e.get("type") for e in events if e.get("type", "").startswith("turn.")][-1] == "turn.completed"
    assert not [e for e in events if e.get("type") in ("error", "turn.failed")], run.describe()
    assert (run.workdir / "hello.txt").read_text() == CONTENT
    return run


def test_codex_apply_patch_through_chat_completions_upstream(agent_clis, gateway, agent_upstream, tmp_path):
    route, secret = _configure(agent_upstream, "chat_completion")
    gateway.wait_config()
    agent_upstream.app.reset(PLAY)
    _run(agent_clis, f"{gateway.url}/v1", secret, tmp_path)

    recorded = agent_upstream.app.recorded()
    assert {r["path"] for r in recorded} == {"/v1/chat/completions"}
    assert_upstream_credentials(
        recorded,
        upstream_key=route.upstream_key,
        client_key=secret,
        upstream_model=UPSTREAM_MODEL,
        headers=("authorization",),
    )
    turns = agent_turns(recorded, "/v1/chat/completions", "apply_patch")
    assert len(turns) == 2, [r["path"] for r in recorded]
    first, second = turns[0]["body"], turns[1]["body"]
    assert first["stream"] is True and second["stream"] is True
    # the upstream streamed the call with its arguments in many small fragments
    assert turns[0]["tool_call"] and turns[0]["frames"] > 20 and not turns[1]["tool_call"]
    # the freeform tool became a JSON function with one string ``input``; no grammar, no built-ins
    assert all(t.get("type") == "function" for t in first["tools"]), first["tools"]
    tool = next(t["function"] for t in first["tools"] if t["function"]["name"] == "apply_patch")
    assert tool["parameters"]["required"] == ["input"]
    assert tool["parameters"]["properties"]["input"]["type"] == "string"
    assert "lark" not in orjson.dumps(first["tools"]).decode().lower()
    assert "Begin Patch" in tool["description"]
    # Codex's system prompt arrives as its developer message, its task as a user message
    assert first["messages"][0]["role"] == "developer"
    assert PROMPT in orjson.dumps([m for m in first["messages"] if m["role"] == "user"]).decode()
    # second turn: the converted call in the history, then its result
    calls = [c for m in second["messages"] if m.get("role") == "assistant" for c in m.get("tool_calls") or []]
    assert [(c["id"], c["type"], c["function"]["name"]) for c in calls] == [
        (PLAY.call_id, "function", "apply_patch")
    ]
    assert orjson.loads(calls[0]["function"]["arguments"]) == {"input": PATCH}
    results = [m for m in second["messages"] if m.get("role") == "tool"]
    assert [m["tool_call_id"] for m in results] == [PLAY.call_id]
    assert "Success. Updated the following files" in orjson.dumps(results[0]["content"]).decode()
    assert second["messages"][-1]["role"] == "tool"


def test_codex_apply_patch_through_responses_upstream_is_lossless(
    agent_clis, gateway, agent_upstream, tmp_path
):
    route, secret = _configure(agent_upstream, "responses")
    gateway.wait_config()

    agent_upstream.app.reset(PLAY)  # 1. Codex straight to the scripted upstream
    _run(agent_clis, f"{agent_upstream.url}/v1", secret, tmp_path)
    direct = agent_turns(agent_upstream.app.recorded(), "/v1/responses", "apply_patch")

    fresh_run_folder(tmp_path, [tmp_path / "work" / "hello.txt"])
    agent_upstream.app.reset(PLAY)  # 2. the same task through the gateway
    _run(agent_clis, f"{gateway.url}/v1", secret, tmp_path)
    recorded = agent_upstream.app.recorded()
    assert_upstream_credentials(
        recorded,
        upstream_key=route.upstream_key,
        client_key=secret,
        upstream_model=UPSTREAM_MODEL,
        headers=("authorization",),
    )
    via = agent_turns(recorded, "/v1/responses", "apply_patch")
    assert len(direct) == len(via) == 2
    assert via[0]["tool_call"] and via[0]["frames"] > 20 and not via[1]["tool_call"]

    for i, (a, b) in enumerate(zip(direct, via, strict=True)):
        diff = first_difference(
            masked(a["body"], VOLATILE, dropped=KNOWN_LOSSES),
            masked(b["body"], VOLATILE, dropped=KNOWN_LOSSES),
        )
        assert diff is None, f"turn {i + 1}: the gateway changed Codex's request at {diff}"
    first, second = via[0]["body"], via[1]["body"]
    tool = next(t for t in first["tools"] if t.get("name") == "apply_patch")
    assert tool["type"] == "custom" and tool["format"]["syntax"] == "lark"
    assert {"web_search", "tool_search"} <= {t["type"] for t in first["tools"]}
    assert first["client_metadata"]  # whitelisted top-level field
    calls = [i for i in second["input"] if i.get("type") == "custom_tool_call"]
    assert [(c["call_id"], c["name"], c["input"]) for c in calls] == [(PLAY.call_id, "apply_patch", PATCH)]
    outputs = [i for i in second["input"] if i.get("type") == "custom_tool_call_output"]
    assert [o["call_id"] for o in outputs] == [PLAY.call_id]
