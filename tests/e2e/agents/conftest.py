"""Fixtures for the agent CLI end-to-end tests: the installed CLIs and the scripted upstream."""

from __future__ import annotations

import os
from pathlib import Path

import orjson
import pytest

from tests.e2e.agents.clients import ensure_installed
from tests.e2e.agents.scripted_upstream import ScriptedUpstreamServer


@pytest.fixture(scope="session")
def agent_clis():
    """Paths of the pinned ``codex`` and ``claude`` binaries; skips with the precise reason when
    node/npm is missing or the npm registry refuses the install."""
    paths, reason = ensure_installed()
    if paths is None:
        pytest.skip(reason)
    return paths


@pytest.fixture(scope="session")
def agent_upstream_server():
    server = ScriptedUpstreamServer().start()
    yield server
    server.stop()


@pytest.fixture
def agent_upstream(agent_upstream_server, request):
    """The scripted upstream, cleared per test; on failure its recorded requests are summarised."""
    agent_upstream_server.app.reset()
    yield agent_upstream_server
    report = getattr(request.node, "rep_call", None)
    dump = os.environ.get("AGENT_E2E_DUMP")
    if dump:  # a folder: every test's upstream requests as JSON, for looking at what the CLIs send
        Path(dump).mkdir(parents=True, exist_ok=True)
        (Path(dump) / f"{request.node.name}.json").write_bytes(
            orjson.dumps(agent_upstream_server.app.recorded(), option=orjson.OPT_INDENT_2)
        )
    if report is not None and report.failed:
        for i, rec in enumerate(agent_upstream_server.app.recorded()):
            body = rec["body"] if isinstance(rec["body"], dict) else {}
            print(
                f"upstream request {i}: {rec['method']} {rec['path']}?{rec['query']} model={body.get('model')!r} "
                f"stream={body.get('stream')!r} tools={[_tool_name(t) for t in body.get('tools') or []]}"
            )


def _tool_name(tool: dict) -> str:
    if isinstance(tool.get("function"), dict):
        return f"function:{tool['function'].get('name')}"
    return f"{tool.get('type')}:{tool.get('name')}"
