"""Request bodies the load generators send and the canned upstream answers nginx returns.

The canned answers are what the bundled mock upstream produces for the same request, frozen, so
every codec sees realistic shapes (usage blocks, ids, nullable fields) and nginx never does work
beyond writing a fixed buffer.
"""

from __future__ import annotations

from typing import Any

import orjson

CHAT_RESPONSE: dict[str, Any] = {
    "id": "chatcmpl-7b92da2a3ad5ef2863985d5a",
    "object": "chat.completion",
    "created": 1796032299,
    "model": "bench-model",
    "choices": [
        {
            "index": 0,
            "message": {
                "role": "assistant",
                "content": "Echo: hello benchmark",
                "refusal": None,
                "annotations": [],
            },
            "logprobs": None,
            "finish_reason": "stop",
        }
    ],
    "usage": {
        "prompt_tokens": 26,
        "completion_tokens": 3,
        "total_tokens": 29,
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": 0,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    },
    "service_tier": "default",
    "system_fingerprint": "fp_bench",
}

RESPONSES_RESPONSE: dict[str, Any] = {
    "id": "resp_640358db1acfdc13521e0811",
    "object": "response",
    "created_at": 1796032299,
    "status": "completed",
    "background": False,
    "completed_at": 1796032300,
    "error": None,
    "incomplete_details": None,
    "instructions": None,
    "max_output_tokens": None,
    "model": "bench-model",
    "output": [
        {
            "id": "msg_640358db1acfdc13521e0811",
            "type": "message",
            "status": "completed",
            "role": "assistant",
            "content": [
                {"type": "output_text", "text": "Echo: hello benchmark", "annotations": [], "logprobs": []}
            ],
        }
    ],
    "parallel_tool_calls": True,
    "previous_response_id": None,
    "reasoning": {"effort": None, "summary": None},
    "service_tier": "default",
    "store": False,
    "temperature": 1.0,
    "text": {"format": {"type": "text"}, "verbosity": "medium"},
    "tool_choice": "auto",
    "tools": [],
    "top_p": 1.0,
    "truncation": "disabled",
    "usage": {
        "input_tokens": 26,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 3,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 29,
    },
    "user": None,
    "metadata": {},
}

MESSAGES_RESPONSE: dict[str, Any] = {
    "id": "msg_158d5cc5124182092751de4a",
    "type": "message",
    "role": "assistant",
    "model": "bench-model",
    "content": [{"type": "text", "text": "Echo: hello benchmark"}],
    "stop_reason": "end_turn",
    "stop_sequence": None,
    "usage": {
        "input_tokens": 26,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": 3,
        "service_tier": "standard",
    },
}

CANNED = {
    "/v1/chat/completions": CHAT_RESPONSE,
    "/v1/responses": RESPONSES_RESPONSE,
    "/v1/messages": MESSAGES_RESPONSE,
}

HELLO = [{"role": "user", "content": "hello benchmark"}]


def chat_body(model: str, *, stream: bool = False) -> dict[str, Any]:
    body: dict[str, Any] = {"model": model, "messages": HELLO}
    if stream:
        body["stream"] = True
    return body


def messages_body(model: str, *, stream: bool = False) -> dict[str, Any]:
    body: dict[str, Any] = {"model": model, "max_tokens": 256, "messages": HELLO}
    if stream:
        body["stream"] = True
    return body


def chain_body(model: str) -> dict[str, Any]:
    """A body every rule of the five-rule chain has something to do with: a developer message
    (role_developer_to_system), two consecutive user turns (role_merge_consecutive), sampling
    fields (field_strip_sampling), a trailing assistant turn (prompt_append_empty_user) and a
    system prompt to inject next to (prompt_inject_system)."""
    return {
        "model": model,
        "temperature": 0.7,
        "top_p": 0.9,
        "messages": [
            {"role": "developer", "content": "You are terse."},
            {"role": "user", "content": "hello"},
            {"role": "user", "content": "benchmark"},
            {"role": "assistant", "content": "Sure:"},
        ],
    }


def _tool(i: int) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": f"tool_{i}",
            "description": f"Benchmark tool number {i}: looks something up and returns JSON.",
            "parameters": {
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "What to look up."},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 100},
                    "filters": {
                        "type": "object",
                        "properties": {
                            "lang": {"type": "string", "enum": ["en", "zh", "fr"]},
                            "since": {"type": "string", "format": "date"},
                        },
                    },
                },
                "required": ["query"],
            },
        },
    }


def large_body(model: str) -> dict[str, Any]:
    """50 messages (system + alternating user/assistant, ~300 characters each) and 10 tools."""
    sentence = "The quick brown fox jumps over the lazy dog while the gateway counts microseconds. "
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a benchmark. " + sentence}]
    for i in range(49):
        role = "user" if i % 2 == 0 else "assistant"
        messages.append({"role": role, "content": f"Turn {i}: " + sentence * 4})
    return {"model": model, "messages": messages, "tools": [_tool(i) for i in range(10)]}


def dumps(body: Any) -> bytes:
    return orjson.dumps(body)
