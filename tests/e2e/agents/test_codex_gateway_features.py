"""Codex CLI using two gateway features its pinned version (0.171.0) can be configured for:

- the model descriptors of ``GET /v1/models`` (issue 19): Codex fetches ``{base_url}/models
  ?client_version=...`` when its provider uses command-backed auth (``auth = {command = ...}``;
  an ``env_key`` provider never asks), and a descriptor for a name it does not know gives that
  model the freeform ``apply_patch`` tool and our instructions, where its fallback metadata has no
  ``apply_patch`` at all (``gateway.proxy.codex_models``);
- the Responses WebSocket transport on ``GET /v1/responses``: a provider with
  ``supports_websockets = true`` sends every turn as a ``response.create`` frame (with the
  ``OpenAI-Beta: responses_websockets=2026-02-06`` handshake header) and falls back to HTTPS,
  saying so in an ``error`` item, when the upgrade fails (seen against a server without it).

Both write a file through a Chat Completions upstream with the paired
``field_custom_tools_to_function`` rules, like ``test_codex``."""

from __future__ import annotations

import orjson
import pytest

from tests.e2e.agents.checks import agent_turns
from tests.e2e.agents.clients import COMMAND_AUTH, INSTALL_TIMEOUT
from tests.e2e.agents.test_codex import PLAY, _configure, _events, _run

pytestmark = pytest.mark.timeout(INSTALL_TIMEOUT + 300)  # the first test may install the CLIs

UNKNOWN_MODEL = "gw-coder-e2e"  # not in Codex's catalogue: without a descriptor, no apply_patch


def test_codex_takes_the_gateways_descriptor_for_a_model_it_does_not_know(
    agent_clis, gateway, agent_upstream, tmp_path
):
    from gateway.models import GlobalSettings
    from gateway.proxy.codex_models import INSTRUCTIONS
    from gateway.services import write_settings

    _, secret = _configure(agent_upstream, "chat_completion", model=UNKNOWN_MODEL)
    assert not write_settings(GlobalSettings.load(), {"codex_model_ids": [UNKNOWN_MODEL]})
    gateway.wait_config()
    agent_upstream.app.reset(PLAY)
    _run(agent_clis, f"{gateway.url}/v1", secret, tmp_path, model=UNKNOWN_MODEL, auth=COMMAND_AUTH)

    turns = agent_turns(agent_upstream.app.recorded(), "/v1/chat/completions", "apply_patch")
    assert len(turns) == 2
    first = turns[0]["body"]
    # the descriptor's instructions are Codex's first developer message: it parsed our ModelInfo
    assert first["messages"][0]["role"] == "developer"
    assert INSTRUCTIONS in orjson.dumps(first["messages"][0]["content"]).decode()
    assert "apply_patch" in [t["function"]["name"] for t in first["tools"]]


def test_codex_over_the_responses_websocket(agent_clis, gateway, agent_upstream, tmp_path):
    _, secret = _configure(agent_upstream, "chat_completion")
    gateway.wait_config()
    agent_upstream.app.reset(PLAY)
    run = _run(
        agent_clis, f"{gateway.url}/v1", secret, tmp_path, provider_extra="supports_websockets = true\n"
    )

    items = [e["item"] for e in _events(run.stdout) if e.get("type") == "item.completed"]
    assert not [i for i in items if i.get("type") == "error"], run.describe()  # no fallback to HTTPS
    # Codex's ``generate: false`` pre-warm stays in the gateway: two upstream calls, the tool call
    # and the final answer
    recorded = agent_upstream.app.recorded()
    assert len(recorded) == 2, [r["path"] for r in recorded]
    turns = agent_turns(recorded, "/v1/chat/completions", "apply_patch")
    assert len(turns) == 2 and turns[0]["tool_call"] and not turns[1]["tool_call"]
    # Codex sent the second turn as a continuation (``previous_response_id`` and the tool output
    # only); the upstream got the whole conversation, from the connection's history
    first, second = turns[0]["body"]["messages"], turns[1]["body"]["messages"]
    assert second[: len(first)] == first
    assert [m["role"] for m in second[len(first) :]] == ["assistant", "tool"]
    assert second[len(first)]["tool_calls"][0]["id"] == PLAY.call_id
