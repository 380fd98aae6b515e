"""Agent-sized request bodies: what Claude Code and Codex send after an hour of work (issue 20).

Deterministic (a seeded ``random.Random``) and shaped like the real clients' requests (the
recorded bodies in ``tests/e2e/agents`` and reference protocols.md §3.2/§3.3):

- ``claude_code_messages_body``: Anthropic Messages as Claude Code sends it: ``system`` as text
  blocks (billing header, identity line and the long prompt, the last two with ``cache_control``),
  40 tools (16 built-in with long descriptions, 24 ``mcp__`` tools) with draft-07 JSON schemas,
  ``thinking`` enabled, ``metadata.user_id``, and a long history: user text with a
  ``<system-reminder>``, assistant turns of thinking (with signature) + text + ``tool_use``, user
  turns of ``tool_result`` blocks carrying file contents (``cat -n`` style, as Read returns them),
  ``cache_control`` on the last block.
- ``codex_responses_body``: OpenAI Responses as Codex sends it: long ``instructions``, function
  tools (``shell``, ``update_plan``, ``view_image``, MCP tools) and the freeform ``apply_patch``
  custom tool with its Lark grammar, input items of developer/user messages (environment
  context), ``reasoning`` with ``encrypted_content``, ``function_call`` /
  ``function_call_output`` with long outputs, ``custom_tool_call`` / ``custom_tool_call_output``
  for patches, assistant messages; ``store: false``, ``include: ["reasoning.encrypted_content"]``,
  ``prompt_cache_key``.

The history grows turn by turn until the serialised body reaches ``size`` bytes (it ends a
little over, by less than one turn; the last user turn then closes it). Both bodies are accepted
by the gateway's decoders: no cross-protocol refusal for Messages -> Chat; Responses -> Chat
needs ``field_custom_tools_to_function`` for ``apply_patch`` (the bench's provider has it).
"""

from __future__ import annotations

import base64
import hashlib
import random
from typing import Any

import orjson

WORDS = (
    "the request handler reads configuration from the snapshot and returns a typed error when the "
    "channel refuses it while retries follow the provider priority order so the breaker opens after "
    "repeated failures within the window and closes again after a cooldown period elapses because "
    "every worker keeps its own state unless redis mirrors it across processes for consistency"
).split()
CODE_LINES = (
    "def {name}(self, request: Request, *, timeout: float = 30.0) -> Response:",
    '    """Return the {name} answer for one request; raises ClientError on bad input."""',
    "    if request.model is None or not request.model.strip():",
    '        raise ClientError(400, "invalid_request", "model is required", param="model")',
    "    for attempt in range(self.max_attempts):",
    "        result = await self.client.post(url, body, headers, total=timeout)",
    "        if result.status < 300:",
    "            return decode_response(orjson.loads(result.body))",
    '    log.warning("{name}: %d attempts failed for %s", self.max_attempts, request.id)',
    '    return {{"id": request.id, "status": "failed", "error": str(exc)}}',
    "class {cls}(BaseModel):",
    "    items: list[dict[str, Any]] = field(default_factory=list)",
    "    total = sum(len(chunk) for chunk in chunks) + len(prefix)",
    "    # The breaker counts only retryable failures; a 400 is the client's fault.",
    "import asyncio, logging, time",
    "",
)
FILE_NAMES = (
    "gateway/proxy/serve.py",
    "gateway/protocols/chat/encode.py",
    "providers/routing.py",
    "gateway/urp/request.py",
    "transforms/registry.py",
    "tests/proxy/test_failover.py",
    "captures/writer.py",
    "gateway/settings.py",
    "docs/architecture.md",
    "keys/models.py",
)


def _words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def _code(rng: random.Random, lines: int, numbered: bool) -> str:
    out = []
    for i in range(1, lines + 1):
        line = rng.choice(CODE_LINES).format(
            name=f"handle_{rng.randrange(1000)}", cls=f"Model{rng.randrange(100)}"
        )
        out.append(f"{i:6d}\u2192{line}" if numbered else line)
    return "\n".join(out)


def _b64(rng: random.Random, n: int) -> str:
    return base64.b64encode(rng.randbytes(n)).decode()


def _hex_id(rng: random.Random, n: int = 24) -> str:
    return rng.randbytes(n // 2).hex()


def _schema(rng: random.Random, n_props: int) -> dict[str, Any]:
    """A JSON schema of a realistic size: typed properties with descriptions, enums, nested."""
    props: dict[str, Any] = {}
    for j in range(n_props):
        kind = j % 5
        desc = _words(rng, rng.randint(8, 30)).capitalize() + "."
        if kind == 0:
            props[f"path_{j}"] = {"type": "string", "description": desc}
        elif kind == 1:
            props[f"limit_{j}"] = {"type": "number", "description": desc, "minimum": 0, "maximum": 600000}
        elif kind == 2:
            props[f"mode_{j}"] = {
                "type": "string",
                "enum": ["content", "files_with_matches", "count"],
                "description": desc,
            }
        elif kind == 3:
            props[f"flag_{j}"] = {"type": "boolean", "description": desc}
        else:
            props[f"items_{j}"] = {
                "type": "array",
                "description": desc,
                "items": {
                    "type": "object",
                    "properties": {
                        "content": {"type": "string", "minLength": 1},
                        "status": {"type": "string", "enum": ["pending", "in_progress", "completed"]},
                        "id": {"type": "string"},
                    },
                    "required": ["content", "status", "id"],
                    "additionalProperties": False,
                },
            }
    return {
        "type": "object",
        "properties": props,
        "required": list(props)[:2],
        "additionalProperties": False,
        "$schema": "http://json-schema.org/draft-07/schema#",
    }


CLAUDE_BUILTINS = (
    "Task",
    "Bash",
    "Glob",
    "Grep",
    "ExitPlanMode",
    "Read",
    "Edit",
    "Write",
    "NotebookEdit",
    "WebFetch",
    "TodoWrite",
    "WebSearch",
    "BashOutput",
    "KillShell",
    "SlashCommand",
    "Skill",
)


def _claude_tools(rng: random.Random) -> list[dict[str, Any]]:
    tools = []
    for i in range(40):
        name = (
            CLAUDE_BUILTINS[i]
            if i < len(CLAUDE_BUILTINS)
            else f"mcp__{('github', 'linear', 'sentry')[i % 3]}__op_{i}"
        )
        # Built-ins carry long usage notes (Bash's is several KB); MCP tools are shorter.
        words = rng.randint(300, 900) if i < len(CLAUDE_BUILTINS) else rng.randint(20, 80)
        tools.append(
            {"name": name, "description": _words(rng, words), "input_schema": _schema(rng, rng.randint(2, 8))}
        )
    return tools


def _sized(build_turn, fixed: dict[str, Any], key: str, size: int) -> dict[str, Any]:
    """``fixed`` with ``fixed[key]`` grown by ``build_turn(i)`` (a list of items) until the body
    serialises to at least ``size`` bytes."""
    total = len(orjson.dumps(fixed))
    i = 0
    while total < size:
        for item in build_turn(i):
            fixed[key].append(item)
            total += len(orjson.dumps(item)) + 1
        i += 1
    return fixed


def claude_code_messages_body(
    model: str, size: int = 1_000_000, *, stream: bool = False, seed: int = 20
) -> dict[str, Any]:
    rng = random.Random(seed)
    ephemeral = {"type": "ephemeral"}
    system = [
        {
            "type": "text",
            "text": "x-anthropic-billing-header: cc_version=2.0.14; cc_entrypoint=cli; cch=8f3a1;",
        },
        {
            "type": "text",
            "text": "You are Claude Code, Anthropic's official CLI for Claude.",
            "cache_control": ephemeral,
        },
        {"type": "text", "text": _words(rng, 2500), "cache_control": ephemeral},
    ]
    first_user = {
        "role": "user",
        "content": [
            {
                "type": "text",
                "text": "<system-reminder>\nAs you answer the user's questions, you can use the following "
                "context:\n# claudeMd\n" + _words(rng, 400) + "\n</system-reminder>",
            },
            {"type": "text", "text": "Refactor the retry loop in the proxy and keep every test green."},
        ],
    }
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": 32000,
        "messages": [first_user],
        "system": system,
        "tools": _claude_tools(rng),
        "metadata": {
            "user_id": "user_"
            + hashlib.sha256(b"bench").hexdigest()
            + "_account__session_"
            + _hex_id(rng, 32)
        },
        "thinking": {"type": "enabled", "budget_tokens": 31999},
        "stream": stream,
    }

    def turn(i: int) -> list[dict[str, Any]]:
        call_id = "toolu_01" + _hex_id(rng, 22)
        thinking = _words(rng, rng.randint(30, 120))
        tool = rng.choice(("Read", "Grep", "Bash", "Edit"))
        path = "/repo/" + rng.choice(FILE_NAMES)
        tool_input: dict[str, Any] = (
            {"file_path": path}
            if tool == "Read"
            else {"pattern": rng.choice(WORDS), "path": "/repo", "output_mode": "content"}
            if tool == "Grep"
            else {
                "command": f"pytest -q tests/proxy -k {rng.choice(WORDS)}",
                "description": "Run the proxy tests",
            }
            if tool == "Bash"
            else {"file_path": path, "old_string": _code(rng, 4, False), "new_string": _code(rng, 5, False)}
        )
        assistant = {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": thinking, "signature": _b64(rng, rng.randint(180, 400))},
                {"type": "text", "text": _words(rng, rng.randint(10, 40))},
                {"type": "tool_use", "id": call_id, "name": tool, "input": tool_input},
            ],
        }
        if i % 4 == 3:  # sometimes the result comes as text blocks, sometimes as an error
            content: Any = [{"type": "text", "text": _code(rng, rng.randint(20, 60), False)}]
        else:
            content = _code(rng, rng.randint(60, 260), numbered=True)
        result: dict[str, Any] = {"type": "tool_result", "tool_use_id": call_id, "content": content}
        if i % 9 == 8:
            result["is_error"] = True
        user: dict[str, Any] = {"role": "user", "content": [result]}
        if i % 5 == 4:
            user["content"].append(
                {"type": "text", "text": "<system-reminder>" + _words(rng, 40) + "</system-reminder>"}
            )
        return [assistant, user]

    body = _sized(turn, body, "messages", size - 200)
    body["messages"].append({"role": "assistant", "content": [{"type": "text", "text": _words(rng, 20)}]})
    body["messages"].append(
        {
            "role": "user",
            "content": [
                {
                    "type": "text",
                    "text": "Good. Now run the whole suite and summarise.",
                    "cache_control": ephemeral,
                }
            ],
        }
    )
    return body


APPLY_PATCH_GRAMMAR = r"""start: begin_patch hunk+ end_patch
begin_patch: "*** Begin Patch" LF
end_patch: "*** End Patch" LF?
hunk: add_hunk | delete_hunk | update_hunk
add_hunk: "*** Add File: " filename LF add_line+
delete_hunk: "*** Delete File: " filename LF
update_hunk: "*** Update File: " filename LF change_move? change?
filename: /(.+)/
add_line: "+" /(.*)/ LF -> line
change_move: "*** Move to: " filename LF
change: (change_context | change_line)+ eof_line?
change_context: ("@@" | "@@ " /(.+)/) LF
change_line: ("+" | "-" | " ") /(.*)/ LF
eof_line: "*** End of File" LF
%import common.LF
"""


def _codex_tools(rng: random.Random) -> list[dict[str, Any]]:
    shell = {
        "type": "function",
        "name": "shell",
        "description": "Runs a shell command and returns its output.\n" + _words(rng, 200),
        "strict": False,
        "parameters": {
            "type": "object",
            "properties": {
                "command": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "The command to execute",
                },
                "workdir": {
                    "type": "string",
                    "description": "The working directory to execute the command in",
                },
                "timeout_ms": {
                    "type": "number",
                    "description": "The timeout for the command in milliseconds",
                },
                "with_escalated_permissions": {"type": "boolean", "description": _words(rng, 20)},
                "justification": {"type": "string", "description": _words(rng, 30)},
            },
            "required": ["command"],
            "additionalProperties": False,
        },
    }
    plan = {
        "type": "function",
        "name": "update_plan",
        "description": _words(rng, 60),
        "strict": False,
        "parameters": {
            "type": "object",
            "properties": {
                "explanation": {"type": "string"},
                "plan": {
                    "type": "array",
                    "description": "The list of steps",
                    "items": {
                        "type": "object",
                        "properties": {
                            "step": {"type": "string"},
                            "status": {
                                "type": "string",
                                "description": "One of: pending, in_progress, completed",
                            },
                        },
                        "required": ["step", "status"],
                        "additionalProperties": False,
                    },
                },
            },
            "required": ["plan"],
            "additionalProperties": False,
        },
    }
    view = {
        "type": "function",
        "name": "view_image",
        "description": _words(rng, 25),
        "strict": False,
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string", "description": "Local path"}},
            "required": ["path"],
            "additionalProperties": False,
        },
    }
    patch = {
        "type": "custom",
        "name": "apply_patch",
        "description": "Use the `apply_patch` tool to edit files. " + _words(rng, 150),
        "format": {"type": "grammar", "syntax": "lark", "definition": APPLY_PATCH_GRAMMAR},
    }
    mcp = [
        {
            "type": "function",
            "name": f"mcp__{('github', 'docs')[i % 2]}__op_{i}",
            "description": _words(rng, 40),
            "strict": False,
            "parameters": {k: v for k, v in _schema(rng, rng.randint(2, 6)).items() if k != "$schema"},
        }
        for i in range(8)
    ]
    return [shell, plan, view, patch, *mcp]


def _codex_patch(rng: random.Random) -> str:
    path = rng.choice(FILE_NAMES)
    lines = [f"*** Begin Patch\n*** Update File: {path}\n@@ def handle_{rng.randrange(1000)}"]
    for _ in range(rng.randint(4, 20)):
        lines.append(rng.choice("+- ") + _code(rng, 1, False))
    return "\n".join(lines) + "\n*** End Patch\n"


def codex_responses_body(
    model: str, size: int = 1_000_000, *, stream: bool = False, seed: int = 20
) -> dict[str, Any]:
    rng = random.Random(seed)
    env = (
        "<environment_context>\n  <cwd>/repo</cwd>\n  <approval_policy>on-request</approval_policy>\n"
        "  <sandbox_mode>workspace-write</sandbox_mode>\n  <network_access>restricted</network_access>\n"
        "  <shell>bash</shell>\n</environment_context>"
    )
    items: list[dict[str, Any]] = [
        {
            "type": "message",
            "role": "developer",
            "content": [
                {
                    "type": "input_text",
                    "text": "<permissions instructions>" + _words(rng, 300) + "</permissions instructions>",
                }
            ],
        },
        {
            "type": "message",
            "role": "user",
            "content": [
                {
                    "type": "input_text",
                    "text": "# AGENTS.md instructions for /repo\n\n<INSTRUCTIONS>\n"
                    + _words(rng, 500)
                    + "\n</INSTRUCTIONS>",
                }
            ],
        },
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": env}]},
        {
            "type": "message",
            "role": "user",
            "content": [
                {
                    "type": "input_text",
                    "text": "Refactor the retry loop in the proxy and keep every test green.",
                }
            ],
        },
    ]
    body: dict[str, Any] = {
        "model": model,
        "instructions": "You are Codex, based on GPT-5. You are running as a coding agent.\n"
        + _words(rng, 3000),
        "input": items,
        "tools": _codex_tools(rng),
        "tool_choice": "auto",
        "parallel_tool_calls": False,
        "reasoning": {"effort": "medium", "summary": "auto"},
        "store": False,
        "stream": stream,
        "include": ["reasoning.encrypted_content"],
        "prompt_cache_key": "0199" + _hex_id(rng, 28),
    }

    def turn(i: int) -> list[dict[str, Any]]:
        call_id = "call_" + _hex_id(rng, 24)
        out: list[dict[str, Any]] = [
            {
                "type": "reasoning",
                "summary": [{"type": "summary_text", "text": "**Planning** " + _words(rng, 30)}],
                "content": None,
                "encrypted_content": "gAAAAAB" + _b64(rng, rng.randint(600, 1800)),
            }
        ]
        if i % 3 == 2:
            out += [
                {
                    "type": "custom_tool_call",
                    "status": "completed",
                    "call_id": call_id,
                    "name": "apply_patch",
                    "input": _codex_patch(rng),
                },
                {
                    "type": "custom_tool_call_output",
                    "call_id": call_id,
                    "output": orjson.dumps(
                        {
                            "output": "Success. Updated the following files:\nM "
                            + rng.choice(FILE_NAMES)
                            + "\n",
                            "metadata": {"exit_code": 0, "duration_seconds": 0.0},
                        }
                    ).decode(),
                },
            ]
        else:
            command = [
                "bash",
                "-lc",
                rng.choice(
                    (
                        f"sed -n '1,200p' {rng.choice(FILE_NAMES)}",
                        f"rg -n {rng.choice(WORDS)} gateway",
                        "pytest -q tests/proxy",
                    )
                ),
            ]
            out += [
                {
                    "type": "function_call",
                    "name": "shell",
                    "call_id": call_id,
                    "arguments": orjson.dumps(
                        {"command": command, "workdir": "/repo", "timeout_ms": 120000}
                    ).decode(),
                },
                {
                    "type": "function_call_output",
                    "call_id": call_id,
                    "output": orjson.dumps(
                        {
                            "output": _code(rng, rng.randint(60, 260), False),
                            "metadata": {"exit_code": 0, "duration_seconds": 0.1},
                        }
                    ).decode(),
                },
            ]
        if i % 4 == 3:
            out.append(
                {
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": _words(rng, rng.randint(20, 60))}],
                }
            )
        return out

    body = _sized(turn, body, "input", size - 200)
    items.append(
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "Good. Now run the whole suite and summarise."}],
        }
    )
    return body
