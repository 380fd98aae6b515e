"""The agent-sized cases of ``make bench`` (issue 20): 1 MB bodies shaped like Claude Code's and
Codex's requests (``agent_payloads``), one connection, direct vs gateway added p50/p99 and the
gateway workers' CPU ms per request.

- ``agent-msgs-chat-1``: Messages client (Claude Code body) -> Chat upstream;
- ``agent-rsp-rsp-1``: Responses client (Codex body) -> Responses upstream;
- ``agent-rsp-chat-1``: Responses client (Codex body) -> Chat upstream (the provider converts the
  ``apply_patch`` custom tool with ``field_custom_tools_to_function``, as a Codex deployment must).

*direct* POSTs the same 1 MB bytes straight to nginx at the upstream's endpoint, so the added
time is the gateway's work, not the cost of moving a megabyte over loopback once. Non-stream
bodies: nginx answers canned JSON; the request side (parse, decode, prepare, encode, send), which
is what grows with the body, is the same for a stream.
"""

from __future__ import annotations

from typing import Any

from . import agent_payloads, servers, wrk
from .cases import Case

ANTHROPIC = {"anthropic-version": "2023-06-01"}
KEYS = ("agent-msgs-chat-1", "agent-rsp-rsp-1", "agent-rsp-chat-1")
NOTE = "1 MB body; direct = the same bytes POSTed to nginx at the upstream's endpoint"


def define(bench: Any) -> None:
    """The family hook (``run.FAMILIES``); the target rows come from ``report_targets.agent_rows``."""
    bench.cases += cases(bench, Case)


def cases(bench: Any, case_cls: type) -> list[Any]:
    """``Case`` entries (``bench.body`` writes a body file)."""
    gw = {"authorization": f"Bearer {servers.PLAIN_KEY}"}
    up = {"authorization": f"Bearer {servers.UPSTREAM_KEY}"}
    chat, msgs, rsp = "/v1/chat/completions", "/v1/messages", "/v1/responses"
    claude = agent_payloads.claude_code_messages_body
    codex = agent_payloads.codex_responses_body
    b = bench.body
    return [
        case_cls(
            KEYS[0],
            "Messages client → Chat upstream, 1 MB Claude Code request, 1 conn",
            1,
            {
                "direct": wrk.WrkRequest(chat, b("direct-agent-msgs", claude("bench-model")), up),
                "gateway": wrk.WrkRequest(
                    msgs,
                    b("gw-agent-msgs", claude("bench-chat")),
                    {"x-api-key": servers.PLAIN_KEY, **ANTHROPIC},
                ),
            },
            note=NOTE,
        ),
        case_cls(
            KEYS[1],
            "Responses client → Responses upstream, 1 MB Codex request, 1 conn",
            1,
            {
                "direct": wrk.WrkRequest(rsp, b("direct-agent-rsp", codex("bench-model")), up),
                "gateway": wrk.WrkRequest(rsp, b("gw-agent-rsp", codex("bench-responses")), gw),
            },
            note=NOTE,
        ),
        case_cls(
            KEYS[2],
            "Responses client → Chat upstream, 1 MB Codex request, 1 conn",
            1,
            {
                "direct": wrk.WrkRequest(chat, b("direct-agent-rsp-chat", codex("bench-model")), up),
                "gateway": wrk.WrkRequest(rsp, b("gw-agent-rsp-chat", codex("bench-codex-chat")), gw),
            },
            note=NOTE,
        ),
    ]
