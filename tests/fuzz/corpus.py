"""Seed material for the fuzz tests: rich valid client requests for each client protocol, valid
upstream answers (whole and streamed) for each upstream protocol, and a structured mutator.

The upstream answers come from the mock upstream's hand-written wire modules (never from our
codecs), so the seeds are independent of the code under test. ``mutate(rng, body)`` is a plain
``random.Random``-driven mutator used by the live test; the hypothesis tests draw the same kinds
of mutation through ``tests/fuzz/strategies.py``.
"""

from __future__ import annotations

import random
from copy import deepcopy
from typing import Any

from gateway.mock_upstream.behaviour import ToolCall, Turn
from gateway.mock_upstream.wire import WireContext
from gateway.mock_upstream.wire import chat as chat_wire
from gateway.mock_upstream.wire import gemini as gemini_wire
from gateway.mock_upstream.wire import messages as messages_wire
from gateway.mock_upstream.wire import responses as responses_wire
from gateway.protocols.sse import SSEParser

Path = tuple[str | int, ...]

SCHEMA = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
    "required": ["a"],
}
PNG = "data:image/png;base64,iVBORw0KGgo="

CHAT_SEED: dict[str, Any] = {
    "model": "fuzz-model",
    "messages": [
        {"role": "system", "content": "be brief"},
        {"role": "developer", "content": [{"type": "text", "text": "dev note"}]},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "hi there"},
                {"type": "image_url", "image_url": {"url": PNG, "detail": "low"}},
                {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}},
                {"type": "file", "file": {"file_id": "file-1", "filename": "a.pdf"}},
            ],
        },
        {
            "role": "assistant",
            "content": "calling",
            "reasoning_content": "thinking it over",
            "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": '{"a": 1}'}},
                {"id": "call_2", "type": "custom", "custom": {"name": "patch", "input": "*** raw"}},
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "found"},
        {"role": "tool", "tool_call_id": "call_2", "content": [{"type": "text", "text": "patched"}]},
        {
            "role": "assistant",
            "content": None,
            "refusal": "no",
            "reasoning_details": [
                {"type": "reasoning.text", "text": "r", "index": 0},
                {"type": "reasoning.encrypted", "data": "enc", "index": 1},
            ],
        },
        {"role": "user", "content": "go on", "name": "bob"},
    ],
    "tools": [
        {
            "type": "function",
            "function": {"name": "lookup", "description": "look", "parameters": SCHEMA, "strict": True},
        },
        {
            "type": "custom",
            "custom": {
                "name": "patch",
                "description": "apply",
                "format": {"type": "grammar", "grammar": {"syntax": "lark", "definition": "start: /.+/"}},
            },
        },
    ],
    "tool_choice": {"type": "function", "function": {"name": "lookup"}},
    "parallel_tool_calls": True,
    "temperature": 0.5,
    "top_p": 1,
    "max_completion_tokens": 256,
    "stop": ["END"],
    "reasoning_effort": "high",
    "response_format": {
        "type": "json_schema",
        "json_schema": {"name": "out", "schema": SCHEMA, "strict": True},
    },
    "stream": False,
    "stream_options": {"include_usage": True},
    "user": "user-1",
    "metadata": {"k": "v"},
    "seed": 7,
}

RESPONSES_SEED: dict[str, Any] = {
    "model": "fuzz-model",
    "instructions": "be brief",
    "input": [
        {"role": "developer", "content": "dev note"},
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": "hi there"},
                {"type": "input_image", "image_url": PNG, "detail": "auto"},
                {"type": "input_file", "file_id": "file-1"},
                {"type": "input_file", "filename": "a.txt", "file_data": "data:text/plain;base64,aGk="},
            ],
        },
        {
            "type": "message",
            "role": "assistant",
            "id": "msg_1",
            "content": [{"type": "output_text", "text": "calling", "annotations": []}],
        },
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [{"type": "summary_text", "text": "plan"}],
            "encrypted_content": "enc",
        },
        {
            "type": "function_call",
            "id": "fc_1",
            "call_id": "call_1",
            "name": "lookup",
            "arguments": '{"a": 1}',
        },
        {"type": "function_call_output", "call_id": "call_1", "output": "found"},
        {"type": "custom_tool_call", "id": "ctc_1", "call_id": "call_2", "name": "patch", "input": "*** raw"},
        {
            "type": "custom_tool_call_output",
            "call_id": "call_2",
            "output": [{"type": "input_text", "text": "patched"}],
        },
        {
            "type": "web_search_call",
            "id": "ws_1",
            "status": "completed",
            "action": {"type": "search", "query": "q"},
        },
        {"role": "user", "content": "go on"},
    ],
    "tools": [
        {"type": "function", "name": "lookup", "description": "look", "parameters": SCHEMA, "strict": True},
        {"type": "custom", "name": "patch", "description": "apply"},
        {"type": "web_search"},
    ],
    "tool_choice": "auto",
    "parallel_tool_calls": False,
    "reasoning": {"effort": "medium", "summary": "auto"},
    "text": {"format": {"type": "json_schema", "name": "out", "schema": SCHEMA}, "verbosity": "low"},
    "max_output_tokens": 256,
    "temperature": 1,
    "top_p": 0.9,
    "stream": False,
    "store": False,
    "include": ["reasoning.encrypted_content"],
    "metadata": {"k": "v"},
    "user": "user-1",
}

MESSAGES_SEED: dict[str, Any] = {
    "model": "fuzz-model",
    "max_tokens": 2048,
    "system": [{"type": "text", "text": "be brief", "cache_control": {"type": "ephemeral"}}],
    "messages": [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "hi there"},
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="},
                },
                {"type": "document", "source": {"type": "url", "url": "https://example.com/a.pdf"}},
            ],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "plan", "signature": "sig"},
                {"type": "text", "text": "calling"},
                {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"a": 1}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": [{"type": "text", "text": "found"}],
                    "is_error": False,
                },
                {"type": "text", "text": "go on"},
            ],
        },
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "more"},
    ],
    "tools": [
        {
            "name": "lookup",
            "description": "look",
            "input_schema": SCHEMA,
            "cache_control": {"type": "ephemeral"},
        },
        {"type": "web_search_20250305", "name": "web_search", "max_uses": 2},
    ],
    "tool_choice": {"type": "auto", "disable_parallel_tool_use": True},
    "thinking": {"type": "enabled", "budget_tokens": 1024},
    "stop_sequences": ["END"],
    "metadata": {"user_id": "user-1"},
    "stream": False,
}

# Gemini as a client (issue 19): the proxy puts the URL's model and stream flag into the body.
GEMINI_SEED: dict[str, Any] = {
    "model": "fuzz-gemini",
    "stream": False,
    "systemInstruction": {"parts": [{"text": "Be brief."}]},
    "contents": [
        {
            "role": "user",
            "parts": [{"text": "hi"}, {"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}}],
        },
        {
            "role": "model",
            "parts": [
                {"text": "thinking", "thought": True, "thoughtSignature": "c2ln"},
                {"functionCall": {"id": "c1", "name": "lookup", "args": {"a": 1}}},
            ],
        },
        {
            "role": "user",
            "parts": [{"functionResponse": {"id": "c1", "name": "lookup", "response": {"r": "ok"}}}],
        },
    ],
    "generationConfig": {
        "temperature": 0.5,
        "topP": 0.9,
        "maxOutputTokens": 100,
        "stopSequences": ["END"],
        "thinkingConfig": {"thinkingBudget": 2048, "includeThoughts": True},
    },
    "tools": [
        {
            "functionDeclarations": [
                {
                    "name": "lookup",
                    "description": "look",
                    "parameters": {"type": "OBJECT", "properties": {"a": {"type": "INTEGER"}}},
                }
            ]
        }
    ],
    "toolConfig": {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["lookup"]}},
}

REQUEST_SEEDS: dict[str, dict[str, Any]] = {
    "chat_completion": CHAT_SEED,
    "responses": RESPONSES_SEED,
    "messages": MESSAGES_SEED,
    "gemini": GEMINI_SEED,
}

WIRES = {
    "chat_completion": chat_wire,
    "responses": responses_wire,
    "messages": messages_wire,
    "gemini": gemini_wire,
}


def _turns() -> list[Turn]:
    calls = [
        ToolCall(name="lookup", arguments='{"a": 1, "b": "x"}', call_id="call_abc"),
        ToolCall(name="patch", arguments="*** raw input", call_id="call_def", kind="custom"),
    ]
    return [
        Turn(text="Hello there, friend", input_tokens=5, output_tokens=4),
        Turn(
            text="Let me check",
            reasoning="think about it",
            reasoning_signature="c2lnbmF0dXJl",
            tool_calls=calls[:1],
            input_tokens=9,
            output_tokens=12,
            reasoning_tokens=3,
        ),
        Turn(tool_calls=calls, input_tokens=3, output_tokens=7),
    ]


def response_seeds(protocol: str) -> list[dict[str, Any]]:
    """Valid whole upstream answers in ``protocol``'s wire shape."""
    wire = WIRES[protocol]
    ctx = WireContext(model="up-model", response_id="0123abcd", created=1_700_000_000)
    return [wire.respond(turn, ctx) for turn in _turns()]


def stream_seeds(protocol: str) -> list[list[tuple[str | None, str]]]:
    """Valid upstream SSE streams in ``protocol``'s wire shape, as parsed (event, data) frames."""
    wire = WIRES[protocol]
    out = []
    for turn in _turns():
        ctx = WireContext(model="up-model", response_id="0123abcd", created=1_700_000_000, include_usage=True)
        parser = SSEParser()
        frames = list(parser.feed(b"".join(wire.stream(turn, ctx)))) + list(parser.close())
        out.append(frames)
    return out


# -- structured mutation ---------------------------------------------------------------------------

WEIRD_STRINGS = [
    "",
    " ",
    "\x00",
    "\u202e\u200b",
    "🦄" * 3,
    "a" * 300,
    "null",
    "[DONE]",
    "{",
    '{"a":',
    "_gw_internal",
    "sk-upstream-leak",
    "<script>",
    "\\u0000",
    "ｆｕｌｌ",
    "é" * 5,
]
HUGE_NUMBERS = [
    2**64 - 1,
    2**63,
    -(2**63),
    1e30,
    1e308,
    -1e308,
    5e-324,
    -1,
    0,
    1.5,
]  # what orjson.loads yields
UNKNOWN_KINDS = ["banana", "TEXT", "", "function ", "tool_use_result", "unknown_type", "_gw_type"]


def all_paths(value: Any, prefix: Path = (), max_depth: int = 24) -> list[Path]:
    """Every path in a JSON value, the root included, down to ``max_depth`` (below that the
    fuzzers' own deep values live; mutating inside them finds nothing new)."""
    out: list[Path] = [prefix]
    if len(prefix) >= max_depth:
        return out
    if isinstance(value, dict):
        for key, item in value.items():
            out.extend(all_paths(item, (*prefix, key)))
    elif isinstance(value, list):
        for idx, item in enumerate(value):
            out.extend(all_paths(item, (*prefix, idx)))
    return out


def get_at(value: Any, path: Path) -> Any:
    for step in path:
        value = value[step]
    return value


def set_at(value: Any, path: Path, new: Any) -> Any:
    """``value`` with the item at ``path`` replaced (the root path replaces everything)."""
    if not path:
        return new
    get_at(value, path[:-1])[path[-1]] = new
    return value


def delete_at(value: Any, path: Path) -> Any:
    if not path:
        return value
    parent = get_at(value, path[:-1])
    del parent[path[-1]]
    return value


def vocabulary() -> list[str]:
    """Every ``type`` and ``role`` value in the seeds: swapping one for another is a good way to
    reach code paths with the wrong fields."""
    found: set[str] = set()

    def walk(v: Any) -> None:
        if isinstance(v, dict):
            for k, item in v.items():
                if k in ("type", "role") and isinstance(item, str):
                    found.add(item)
                walk(item)
        elif isinstance(v, list):
            for item in v:
                walk(item)

    for seed in REQUEST_SEEDS.values():
        walk(seed)
    for proto in WIRES:
        for body in response_seeds(proto):
            walk(body)
    return sorted(found)


VOCABULARY = vocabulary()


def deep(depth: int) -> Any:
    value: Any = "x"
    for i in range(depth):
        value = [value] if i % 2 else {"content": value}
    return value


def junk(rng: random.Random, near: Any = None) -> Any:
    """A replacement value: wrong type, null, huge number, odd unicode, deep nesting, a swapped
    kind, or an object that looks like a content part of an unknown type."""
    roll = rng.randrange(12)
    if roll == 0:
        return None
    if roll == 1:
        return rng.choice([True, False])
    if roll == 2:
        return rng.choice(HUGE_NUMBERS)
    if roll == 3:
        return rng.choice(WEIRD_STRINGS)
    if roll == 4:
        return rng.choice([[], {}, [None], [{}], [[]], {"": None}])
    if roll == 5:
        return deep(rng.choice([rng.randrange(20, 140), rng.randrange(250, 400)]))
    if roll == 6:
        return rng.choice(VOCABULARY + UNKNOWN_KINDS)
    if roll == 7:
        return {
            "type": rng.choice(VOCABULARY + UNKNOWN_KINDS),
            rng.choice(["text", "content", "id"]): junk(rng),
        }
    if roll == 8 and isinstance(near, str):
        return [near]
    if roll == 8 and isinstance(near, (dict, list)):
        return rng.choice([str(near)[:40], len(near)])
    if roll == 9:
        return {"_gw_spoof": True, "type": "text", "text": "x"}
    if roll == 10:
        return {"a": 1}  # e.g. non-string tool arguments
    return rng.randint(-5, 5)


def mutate_once(rng: random.Random, body: Any) -> Any:
    paths = all_paths(body)
    path = rng.choice(paths)
    target = get_at(body, path)
    op = rng.randrange(7)
    if op == 0 and path:
        return delete_at(body, path)
    if op == 1 and isinstance(target, dict):
        key = rng.choice(
            [
                "_gw_" + rng.choice(["legacy", "raw", "x"]),
                "type",
                "role",
                "content",
                "zz_unknown",
                "id",
                "name",
                "arguments",
                "input",
            ]
        )
        target[key] = junk(rng)
        return body
    if op == 2 and isinstance(target, list) and target:
        choice = rng.randrange(3)
        if choice == 0:
            target.clear()
        elif choice == 1:
            target.append(deepcopy(rng.choice(target)))
        else:
            target.reverse()
        return body
    if op == 3 and path and path[-1] in ("type", "role"):
        return set_at(body, path, rng.choice(VOCABULARY + UNKNOWN_KINDS))
    if op == 4 and path and path[-1] in ("arguments", "input"):
        return set_at(
            body,
            path,
            rng.choice(
                [{"a": 1}, [1, 2], 3, None, "{not json", "[]", '"str"', '{"a":' + "[" * 300 + "]" * 300 + "}"]
            ),
        )
    return set_at(body, path, junk(rng, target))


def mutate(rng: random.Random, body: Any, max_ops: int = 3) -> Any:
    """A copy of ``body`` with 1..max_ops structured mutations."""
    body = deepcopy(body)
    for _ in range(rng.randint(1, max_ops)):
        body = mutate_once(rng, body)
    return body
