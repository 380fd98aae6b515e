"""Codec matrix: 4 client protocols x 4 upstream protocols x {non-stream, stream} x scenarios.

Per cell, in process (no HTTP): client body -> decode -> clone -> prepare_for_upstream ->
encode_request for the upstream (only the upstream's envelope, the user text, the right stream
flag, tools and tool results mapped) -> a canned upstream reply in the upstream's wire format ->
decode -> encode for the client -> the client's lifecycle checker and the official SDK
(``openai`` for Chat and Responses, ``anthropic`` for Messages, ``google-genai`` for Gemini, whose
client half lives in ``matrix_gemini``) see the text, tool calls and
usage. Same-protocol cells must also be lossless (request and non-stream response).
"""

from __future__ import annotations

import copy
from typing import Any

import anthropic
import httpx
import openai
import orjson
import pytest

from gateway.protocols import CLIENT_PROTOCOLS, UPSTREAM_PROTOCOLS, codec
from gateway.protocols.base import EncodeContext
from gateway.protocols.sse import SSEParser
from gateway.proxy.prepare import prepare_for_upstream
from gateway.urp import clone
from tests.sdk_http import httpx_for

from .check_chat_stream import check_chat_stream
from .check_messages_stream import check_messages_stream
from .check_responses_stream import check_responses_stream
from .matrix_gemini import gemini_body, gemini_view, wire_body

MATRIX_CLIENTS = CLIENT_PROTOCOLS

LOGICAL = "matrix-model"
UPSTREAM_MODEL = "up-model"
USER_TEXT = "Hello matrix"
REPLY_TEXT = "Hi from upstream"
SIG = "SIGabc123"  # not base64: a Gemini client gets it wrapped (gateway.protocols.gemini.client)
GEMINI_SIG = "R0VNc2lnMTIz"  # Gemini's own signatures are base64
IMG_URL = "https://example.com/cat.png"
IMG_B64 = "iVBORw0KGgoAAAANSUhEUg"
TOOL_PARAMS = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
HISTORY_CALLS = [("call_paris", '{"city":"Paris"}'), ("call_rome", '{"city":"Rome"}')]
REPLY_CALLS = [("call_oslo", "get_weather", {"city": "Oslo"}), ("call_lima", "get_weather", {"city": "Lima"})]
USAGE_IN, USAGE_OUT = 21, 9
SCENARIOS = ("plain", "multiturn", "tools", "image", "reasoning")


# -- client request bodies ------------------------------------------------------------------


def chat_body(scenario: str, stream: bool) -> dict[str, Any]:
    msgs: list[dict[str, Any]]
    body: dict[str, Any] = {"model": LOGICAL}
    if scenario == "plain":
        msgs = [{"role": "user", "content": USER_TEXT}]
    elif scenario == "multiturn":
        msgs = [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "first question"},
            {"role": "assistant", "content": "first answer"},
            {"role": "user", "content": USER_TEXT},
        ]
    elif scenario == "tools":
        body["tools"] = [
            {
                "type": "function",
                "function": {"name": "get_weather", "description": "Weather", "parameters": TOOL_PARAMS},
            }
        ]
        msgs = [
            {"role": "user", "content": USER_TEXT + ": weather in Paris and Rome?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": cid, "type": "function", "function": {"name": "get_weather", "arguments": args}}
                    for cid, args in HISTORY_CALLS
                ],
            },
            {"role": "tool", "tool_call_id": "call_paris", "content": "sunny"},
            {"role": "tool", "tool_call_id": "call_rome", "content": "rainy"},
            {"role": "user", "content": "and Oslo and Lima?"},
        ]
    elif scenario == "image":
        msgs = [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": USER_TEXT + ": describe"},
                    {"type": "image_url", "image_url": {"url": IMG_URL}},
                    {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{IMG_B64}"}},
                ],
            }
        ]
    else:
        body["reasoning_effort"] = "high"
        msgs = [
            {"role": "user", "content": "first question"},
            {
                "role": "assistant",
                "content": "first answer",
                "reasoning_details": [
                    {
                        "type": "reasoning.text",
                        "text": "thinking hard",
                        "signature": "HISTSIG",
                        "index": 0,
                        "format": "anthropic-claude-v1",
                    }
                ],
            },
            {"role": "user", "content": USER_TEXT},
        ]
    body["messages"] = msgs
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    return body


def responses_body(scenario: str, stream: bool) -> dict[str, Any]:
    body: dict[str, Any] = {"model": LOGICAL}
    if scenario == "plain":
        body["input"] = USER_TEXT
    elif scenario == "multiturn":
        body["instructions"] = "You are terse."
        body["input"] = [
            {"role": "user", "content": [{"type": "input_text", "text": "first question"}]},
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "first answer"}],
            },
            {"role": "user", "content": [{"type": "input_text", "text": USER_TEXT}]},
        ]
    elif scenario == "tools":
        body["tools"] = [
            {"type": "function", "name": "get_weather", "description": "Weather", "parameters": TOOL_PARAMS}
        ]
        body["input"] = [
            {
                "role": "user",
                "content": [{"type": "input_text", "text": USER_TEXT + ": weather in Paris and Rome?"}],
            },
            *[
                {"type": "function_call", "call_id": cid, "name": "get_weather", "arguments": args}
                for cid, args in HISTORY_CALLS
            ],
            {"type": "function_call_output", "call_id": "call_paris", "output": "sunny"},
            {"type": "function_call_output", "call_id": "call_rome", "output": "rainy"},
            {"role": "user", "content": [{"type": "input_text", "text": "and Oslo and Lima?"}]},
        ]
    elif scenario == "image":
        body["input"] = [
            {
                "role": "user",
                "content": [
                    {"type": "input_text", "text": USER_TEXT + ": describe"},
                    {"type": "input_image", "image_url": IMG_URL, "detail": "auto"},
                    {
                        "type": "input_image",
                        "image_url": f"data:image/png;base64,{IMG_B64}",
                        "detail": "auto",
                    },
                ],
            }
        ]
    else:
        body["reasoning"] = {"effort": "high"}
        body["include"] = ["reasoning.encrypted_content"]
        body["input"] = [
            {"role": "user", "content": [{"type": "input_text", "text": "first question"}]},
            {
                "type": "reasoning",
                "id": "rs_hist",
                "summary": [{"type": "summary_text", "text": "thinking hard"}],
                "encrypted_content": "HISTSIG",
            },
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "first answer"}],
            },
            {"role": "user", "content": [{"type": "input_text", "text": USER_TEXT}]},
        ]
    if stream:
        body["stream"] = True
    return body


def messages_body(scenario: str, stream: bool) -> dict[str, Any]:
    body: dict[str, Any] = {"model": LOGICAL, "max_tokens": 4096}
    if scenario == "plain":
        body["messages"] = [{"role": "user", "content": USER_TEXT}]
    elif scenario == "multiturn":
        body["system"] = "You are terse."
        body["messages"] = [
            {"role": "user", "content": "first question"},
            {"role": "assistant", "content": "first answer"},
            {"role": "user", "content": USER_TEXT},
        ]
    elif scenario == "tools":
        body["tools"] = [{"name": "get_weather", "description": "Weather", "input_schema": TOOL_PARAMS}]
        body["messages"] = [
            {"role": "user", "content": USER_TEXT + ": weather in Paris and Rome?"},
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": cid, "name": "get_weather", "input": orjson.loads(args)}
                    for cid, args in HISTORY_CALLS
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "call_paris", "content": "sunny"},
                    {"type": "tool_result", "tool_use_id": "call_rome", "content": "rainy"},
                    {"type": "text", "text": "and Oslo and Lima?"},
                ],
            },
        ]
    elif scenario == "image":
        body["messages"] = [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": USER_TEXT + ": describe"},
                    {"type": "image", "source": {"type": "url", "url": IMG_URL}},
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/png", "data": IMG_B64},
                    },
                ],
            }
        ]
    else:
        body["thinking"] = {"type": "enabled", "budget_tokens": 2048}
        body["messages"] = [
            {"role": "user", "content": "first question"},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "thinking hard", "signature": "HISTSIG"},
                    {"type": "text", "text": "first answer"},
                ],
            },
            {"role": "user", "content": USER_TEXT},
        ]
    if stream:
        body["stream"] = True
    return body


CLIENT_BODIES = {
    "chat_completion": chat_body,
    "responses": responses_body,
    "messages": messages_body,
    "gemini": gemini_body,
}


# -- canned upstream replies ------------------------------------------------------------------


def reply_for(scenario: str) -> dict[str, Any]:
    return {
        "text": None if scenario == "tools" else REPLY_TEXT,
        "calls": REPLY_CALLS if scenario == "tools" else [],
        "reasoning": ("pondering", SIG) if scenario == "reasoning" else None,
    }


def _sse(obj: Any, event: str | None = None) -> str:
    data = obj if isinstance(obj, str) else orjson.dumps(obj).decode()
    return (f"event: {event}\n" if event else "") + f"data: {data}\n\n"


def chat_reply(r: dict[str, Any], stream: bool) -> Any:
    usage = {"prompt_tokens": USAGE_IN, "completion_tokens": USAGE_OUT, "total_tokens": USAGE_IN + USAGE_OUT}
    finish = "tool_calls" if r["calls"] else "stop"
    if not stream:
        msg: dict[str, Any] = {"role": "assistant", "content": r["text"]}
        if r["reasoning"]:
            msg["reasoning_details"] = [
                {
                    "type": "reasoning.text",
                    "text": r["reasoning"][0],
                    "signature": r["reasoning"][1],
                    "format": "anthropic-claude-v1",
                    "index": 0,
                }
            ]
        if r["calls"]:
            msg["tool_calls"] = [
                {
                    "id": cid,
                    "type": "function",
                    "function": {"name": name, "arguments": orjson.dumps(args).decode()},
                }
                for cid, name, args in r["calls"]
            ]
        return {
            "id": "chatcmpl-up1",
            "object": "chat.completion",
            "created": 1700000000,
            "model": UPSTREAM_MODEL,
            "choices": [{"index": 0, "message": msg, "finish_reason": finish}],
            "usage": usage,
        }
    head = {
        "id": "chatcmpl-up1",
        "object": "chat.completion.chunk",
        "created": 1700000000,
        "model": UPSTREAM_MODEL,
    }

    def ch(delta: dict[str, Any], fin: str | None = None) -> str:
        return _sse({**head, "choices": [{"index": 0, "delta": delta, "finish_reason": fin}]})

    out = ch({"role": "assistant", "content": ""})
    if r["reasoning"]:
        out += ch(
            {
                "reasoning_details": [
                    {
                        "type": "reasoning.text",
                        "text": r["reasoning"][0],
                        "index": 0,
                        "format": "anthropic-claude-v1",
                    }
                ]
            }
        )
        out += ch(
            {
                "reasoning_details": [
                    {
                        "type": "reasoning.text",
                        "signature": r["reasoning"][1],
                        "index": 0,
                        "format": "anthropic-claude-v1",
                    }
                ]
            }
        )
    if r["text"]:
        out += ch({"content": r["text"][:5]}) + ch({"content": r["text"][5:]})
    for i, (cid, name, args) in enumerate(r["calls"]):
        text = orjson.dumps(args).decode()
        out += ch(
            {
                "tool_calls": [
                    {
                        "index": i,
                        "id": cid,
                        "type": "function",
                        "function": {"name": name, "arguments": text[:4]},
                    }
                ]
            }
        )
        out += ch({"tool_calls": [{"index": i, "function": {"arguments": text[4:]}}]})
    out += ch({}, finish)
    out += _sse({**head, "choices": [], "usage": usage}) + _sse("[DONE]")
    return out.encode()


def responses_reply(r: dict[str, Any], stream: bool) -> Any:
    output: list[dict[str, Any]] = []
    if r["reasoning"]:
        output.append(
            {
                "type": "reasoning",
                "id": "rs_up",
                "summary": [{"type": "summary_text", "text": r["reasoning"][0]}],
                "encrypted_content": r["reasoning"][1],
            }
        )
    if r["text"]:
        output.append(
            {
                "type": "message",
                "id": "msg_up",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": r["text"], "annotations": []}],
            }
        )
    for i, (cid, name, args) in enumerate(r["calls"]):
        output.append(
            {
                "type": "function_call",
                "id": f"fc_up{i}",
                "call_id": cid,
                "name": name,
                "arguments": orjson.dumps(args).decode(),
                "status": "completed",
            }
        )
    usage = {
        "input_tokens": USAGE_IN,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": USAGE_OUT,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": USAGE_IN + USAGE_OUT,
    }
    final = {
        "id": "resp_up1",
        "object": "response",
        "created_at": 1700000000,
        "status": "completed",
        "model": UPSTREAM_MODEL,
        "output": output,
        "usage": usage,
    }
    if not stream:
        return final
    seq = 0

    def ev(name: str, payload: dict[str, Any]) -> str:
        nonlocal seq
        seq += 1
        return _sse({"type": name, "sequence_number": seq, **payload}, name)

    start = {**final, "status": "in_progress", "output": [], "usage": None}
    out = ev("response.created", {"response": start}) + ev("response.in_progress", {"response": start})
    for oi, item in enumerate(output):
        if item["type"] == "reasoning":
            out += ev(
                "response.output_item.added",
                {"output_index": oi, "item": {**item, "summary": [], "encrypted_content": None}},
            )
            out += ev(
                "response.reasoning_summary_part.added",
                {
                    "item_id": item["id"],
                    "output_index": oi,
                    "summary_index": 0,
                    "part": {"type": "summary_text", "text": ""},
                },
            )
            text = item["summary"][0]["text"]
            out += ev(
                "response.reasoning_summary_text.delta",
                {"item_id": item["id"], "output_index": oi, "summary_index": 0, "delta": text},
            )
            out += ev(
                "response.reasoning_summary_text.done",
                {"item_id": item["id"], "output_index": oi, "summary_index": 0, "text": text},
            )
            out += ev(
                "response.reasoning_summary_part.done",
                {
                    "item_id": item["id"],
                    "output_index": oi,
                    "summary_index": 0,
                    "part": {"type": "summary_text", "text": text},
                },
            )
        elif item["type"] == "message":
            text = item["content"][0]["text"]
            out += ev(
                "response.output_item.added",
                {"output_index": oi, "item": {**item, "status": "in_progress", "content": []}},
            )
            out += ev(
                "response.content_part.added",
                {
                    "item_id": item["id"],
                    "output_index": oi,
                    "content_index": 0,
                    "part": {"type": "output_text", "text": "", "annotations": []},
                },
            )
            for piece in (text[:5], text[5:]):
                out += ev(
                    "response.output_text.delta",
                    {
                        "item_id": item["id"],
                        "output_index": oi,
                        "content_index": 0,
                        "delta": piece,
                        "logprobs": [],
                    },
                )
            out += ev(
                "response.output_text.done",
                {"item_id": item["id"], "output_index": oi, "content_index": 0, "text": text, "logprobs": []},
            )
            out += ev(
                "response.content_part.done",
                {"item_id": item["id"], "output_index": oi, "content_index": 0, "part": item["content"][0]},
            )
        else:
            out += ev(
                "response.output_item.added",
                {"output_index": oi, "item": {**item, "arguments": "", "status": "in_progress"}},
            )
            out += ev(
                "response.function_call_arguments.delta",
                {"item_id": item["id"], "output_index": oi, "delta": item["arguments"]},
            )
            out += ev(
                "response.function_call_arguments.done",
                {"item_id": item["id"], "output_index": oi, "arguments": item["arguments"]},
            )
        out += ev("response.output_item.done", {"output_index": oi, "item": item})
    out += ev("response.completed", {"response": final})
    return out.encode()


def messages_reply(r: dict[str, Any], stream: bool) -> Any:
    content: list[dict[str, Any]] = []
    if r["reasoning"]:
        content.append({"type": "thinking", "thinking": r["reasoning"][0], "signature": r["reasoning"][1]})
    if r["text"]:
        content.append({"type": "text", "text": r["text"]})
    for cid, name, args in r["calls"]:
        content.append({"type": "tool_use", "id": cid, "name": name, "input": args})
    stop = "tool_use" if r["calls"] else "end_turn"
    usage = {"input_tokens": USAGE_IN, "output_tokens": USAGE_OUT}
    msg = {
        "id": "msg_up1",
        "type": "message",
        "role": "assistant",
        "model": UPSTREAM_MODEL,
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": usage,
    }
    if not stream:
        return msg

    def ev(name: str, payload: dict[str, Any]) -> str:
        return _sse({"type": name, **payload}, name)

    out = ev(
        "message_start",
        {
            "message": {
                **msg,
                "content": [],
                "stop_reason": None,
                "usage": {"input_tokens": USAGE_IN, "output_tokens": 1},
            }
        },
    )
    out += ev("ping", {})
    for i, block in enumerate(content):
        if block["type"] == "thinking":
            out += ev(
                "content_block_start",
                {"index": i, "content_block": {"type": "thinking", "thinking": "", "signature": ""}},
            )
            out += ev(
                "content_block_delta",
                {"index": i, "delta": {"type": "thinking_delta", "thinking": block["thinking"]}},
            )
            out += ev(
                "content_block_delta",
                {"index": i, "delta": {"type": "signature_delta", "signature": block["signature"]}},
            )
        elif block["type"] == "text":
            out += ev("content_block_start", {"index": i, "content_block": {"type": "text", "text": ""}})
            for piece in (block["text"][:5], block["text"][5:]):
                out += ev("content_block_delta", {"index": i, "delta": {"type": "text_delta", "text": piece}})
        else:
            out += ev(
                "content_block_start",
                {
                    "index": i,
                    "content_block": {
                        "type": "tool_use",
                        "id": block["id"],
                        "name": block["name"],
                        "input": {},
                    },
                },
            )
            text = orjson.dumps(block["input"]).decode()
            for piece in (text[:4], text[4:]):
                out += ev(
                    "content_block_delta",
                    {"index": i, "delta": {"type": "input_json_delta", "partial_json": piece}},
                )
        out += ev("content_block_stop", {"index": i})
    out += ev(
        "message_delta",
        {"delta": {"stop_reason": stop, "stop_sequence": None}, "usage": {"output_tokens": USAGE_OUT}},
    )
    out += ev("message_stop", {})
    return out.encode()


def gemini_reply(r: dict[str, Any], stream: bool) -> Any:
    parts: list[dict[str, Any]] = []
    if r["reasoning"]:
        parts.append({"text": r["reasoning"][0], "thought": True, "thoughtSignature": GEMINI_SIG})
    if r["text"]:
        parts.append({"text": r["text"]})
    for cid, name, args in r["calls"]:
        parts.append({"functionCall": {"id": cid, "name": name, "args": args}})
    usage = {
        "promptTokenCount": USAGE_IN,
        "candidatesTokenCount": USAGE_OUT,
        "totalTokenCount": USAGE_IN + USAGE_OUT,
    }
    if not stream:
        return {
            "candidates": [
                {"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}
            ],
            "usageMetadata": usage,
            "modelVersion": UPSTREAM_MODEL,
            "responseId": "gem_up1",
        }
    out = ""
    for i, part in enumerate(parts):
        chunk: dict[str, Any] = {
            "candidates": [{"content": {"role": "model", "parts": [part]}, "index": 0}],
            "modelVersion": UPSTREAM_MODEL,
            "responseId": "gem_up1",
        }
        if i == len(parts) - 1:
            chunk["candidates"][0]["finishReason"] = "STOP"
            chunk["usageMetadata"] = usage
        out += _sse(chunk)
    return out.encode()


UPSTREAM_REPLIES = {
    "chat_completion": chat_reply,
    "responses": responses_reply,
    "messages": messages_reply,
    "gemini": gemini_reply,
}


# -- upstream request checks --------------------------------------------------------------------


def check_upstream_request(proto: str, body: dict[str, Any], path: str, scenario: str, stream: bool) -> None:
    text = orjson.dumps(body).decode()
    assert USER_TEXT in text, "the user's text reaches the upstream"
    assert "_gw_" not in text, "internal markers never go on the wire"
    if proto == "chat_completion":
        assert "messages" in body and not {"input", "contents", "system", "instructions"} & body.keys()
        assert {m["role"] for m in body["messages"]} <= {"system", "developer", "user", "assistant", "tool"}
        assert body.get("stream", False) is stream
        if stream:
            assert body["stream_options"]["include_usage"] is True
    elif proto == "responses":
        assert "input" in body and not {"messages", "contents"} & body.keys()
        assert body.get("stream", False) is stream
    elif proto == "messages":
        assert "messages" in body and "max_tokens" in body and not {"input", "contents"} & body.keys()
        assert {m["role"] for m in body["messages"]} <= {"user", "assistant"}
        assert body.get("stream", False) is stream
    else:
        assert "contents" in body and not {"messages", "input"} & body.keys()
        assert "stream" not in body
        assert path.endswith(":streamGenerateContent?alt=sse" if stream else ":generateContent")
        assert UPSTREAM_MODEL in path
    assert body.get("model", UPSTREAM_MODEL) == UPSTREAM_MODEL
    if scenario == "tools":
        _check_tools(proto, body)
    if scenario == "image":
        assert IMG_B64 in text, "base64 image reaches the upstream"
        if proto != "gemini":
            assert IMG_URL in text, "URL image reaches the upstream"
    if scenario == "multiturn":
        assert "You are terse." in text and "first answer" in text


def _check_tools(proto: str, body: dict[str, Any]) -> None:
    ids = {cid for cid, _ in HISTORY_CALLS}
    if proto == "chat_completion":
        assert [t["function"]["name"] for t in body["tools"]] == ["get_weather"]
        assert body["tools"][0]["function"]["parameters"] == TOOL_PARAMS
        calls = [c for m in body["messages"] for c in m.get("tool_calls") or []]
        results = [m for m in body["messages"] if m["role"] == "tool"]
        assert {c["id"] for c in calls} == ids and {r["tool_call_id"] for r in results} == ids
        assert len([m for m in body["messages"] if m.get("tool_calls")]) == 1, "parallel calls in one message"
        assert [r["content"] for r in results] == ["sunny", "rainy"]
    elif proto == "responses":
        assert [t["name"] for t in body["tools"]] == ["get_weather"] and body["tools"][0][
            "type"
        ] == "function"
        items = body["input"]
        assert {i["call_id"] for i in items if i.get("type") == "function_call"} == ids
        outs = [i for i in items if i.get("type") == "function_call_output"]
        assert {o["call_id"] for o in outs} == ids
        assert "sunny" in orjson.dumps(outs).decode()
    elif proto == "messages":
        assert [t["name"] for t in body["tools"]] == ["get_weather"]
        assert body["tools"][0]["input_schema"]["properties"] == TOOL_PARAMS["properties"]
        blocks = [b for m in body["messages"] if isinstance(m["content"], list) for b in m["content"]]
        assert {b["id"] for b in blocks if b["type"] == "tool_use"} == ids
        results = [b for b in blocks if b["type"] == "tool_result"]
        assert {b["tool_use_id"] for b in results} == ids
        assert "sunny" in orjson.dumps(results).decode()
    else:
        decls = [d for t in body["tools"] for d in t.get("functionDeclarations", [])]
        assert [d["name"] for d in decls] == ["get_weather"]
        parts = [p for c in body["contents"] for p in c["parts"]]
        assert len([p for p in parts if "functionCall" in p]) == 2
        responses = [p["functionResponse"] for p in parts if "functionResponse" in p]
        assert len(responses) == 2 and {r["name"] for r in responses} == {"get_weather"}
        assert "sunny" in orjson.dumps(responses).decode()


# -- running a cell -----------------------------------------------------------------------------


def decode_stream(codec, raw: bytes) -> list:
    parser, dec, events = SSEParser(), codec.StreamDecoder(), []
    for i in range(0, len(raw), 37):  # arbitrary read boundaries
        for name, data in parser.feed(raw[i : i + 37]):
            events.extend(dec.feed(name, data))
    for name, data in parser.close():
        events.extend(dec.feed(name, data))
    events.extend(dec.close())
    return events


def run_cell(client: str, upstream: str, scenario: str, stream: bool) -> tuple[dict, Any]:
    ccodec, ucodec = codec(client), codec(upstream)
    body = CLIENT_BODIES[client](scenario, stream)
    original = copy.deepcopy(body)
    req = ccodec.decode_request(body)
    attempt = clone(req)
    prepare_for_upstream(
        attempt, upstream_protocol=upstream, source_protocol=client, strip_nested=True, extra_whitelist=None
    )
    upstream_body = ucodec.encode_request(
        attempt, EncodeContext(model=UPSTREAM_MODEL, source_protocol=client)
    )
    check_upstream_request(
        upstream, upstream_body, ucodec.upstream_path(UPSTREAM_MODEL, stream), scenario, stream
    )
    assert body == original, "decoding never mutates the client body"
    if scenario == "reasoning" and (
        client == upstream or {client, upstream} == {"chat_completion", "messages"}
    ):
        # Anthropic-style signatures survive Chat <-> Messages; same-family replays everything
        assert "HISTSIG" in orjson.dumps(upstream_body).decode(), "reasoning signature history is replayed"
    reply = UPSTREAM_REPLIES[upstream](reply_for(scenario), stream)
    ctx = EncodeContext(model=LOGICAL, source_protocol=upstream, include_usage=True)
    if not stream:
        resp = ucodec.decode_response(reply)
        return upstream_body, ccodec.encode_response(resp, ctx)
    events = decode_stream(ucodec, reply)
    enc = ccodec.StreamEncoder(ctx)
    raw = b"".join(enc.encode(e) for e in events) + enc.close()
    return upstream_body, raw


# -- what the client sees -------------------------------------------------------------------------


def client_view(client: str, out: Any, stream: bool) -> dict[str, Any]:
    """Text, tool calls (id, name, parsed args), usage and the raw JSON text, read through the
    client's lifecycle checker (stream) and the official SDK (both)."""
    if client == "chat_completion":
        if stream:
            check_chat_stream(out, include_usage=True)
        return _openai_chat(out, stream)
    if client == "responses":
        if stream:
            check_responses_stream(out)
        return _openai_responses(out, stream)
    if client == "gemini":
        return gemini_view(out, stream, _raw(out, stream))
    if stream:
        check_messages_stream(out)
    return _anthropic_messages(out, stream)


def _transport(payload: bytes, stream: bool, sdk: Any = openai) -> httpx.Client:
    """A client answering every request with ``payload``, in the httpx flavour ``sdk`` takes
    (anthropic 2.x uses httpx2)."""
    hx = httpx_for(sdk)
    ctype = "text/event-stream" if stream else "application/json"
    return hx.Client(
        transport=hx.MockTransport(
            lambda request: hx.Response(200, content=payload, headers={"content-type": ctype})
        )
    )


def _raw(out: Any, stream: bool) -> bytes:
    return out if stream else orjson.dumps(out)


def _openai_chat(out: Any, stream: bool) -> dict[str, Any]:
    if not stream:
        assert (
            out["object"] == "chat.completion"
            and out["model"] == LOGICAL
            and isinstance(out["choices"], list)
        )
    client = openai.OpenAI(
        api_key="k", base_url="http://gw/v1", http_client=_transport(_raw(out, stream), stream)
    )
    args = {"model": LOGICAL, "messages": [{"role": "user", "content": "x"}]}
    if stream:
        with client.chat.completions.stream(**args, stream_options={"include_usage": True}) as s:
            result = s.get_final_completion()
    else:
        result = client.chat.completions.create(**args)
    msg = result.choices[0].message
    calls = [(c.id, c.function.name, orjson.loads(c.function.arguments)) for c in msg.tool_calls or []]
    return {
        "text": msg.content or "",
        "calls": calls,
        "usage": (result.usage.prompt_tokens, result.usage.completion_tokens),
        "finish": result.choices[0].finish_reason,
        "json": _raw(out, stream).decode(),
    }


def _openai_responses(out: Any, stream: bool) -> dict[str, Any]:
    if not stream:
        assert out["object"] == "response" and out["model"] == LOGICAL and isinstance(out["output"], list)
    client = openai.OpenAI(
        api_key="k", base_url="http://gw/v1", http_client=_transport(_raw(out, stream), stream)
    )
    if stream:
        with client.responses.stream(model=LOGICAL, input="x") as s:
            result = s.get_final_response()
    else:
        result = client.responses.create(model=LOGICAL, input="x")
    calls = [
        (i.call_id, i.name, orjson.loads(i.arguments)) for i in result.output if i.type == "function_call"
    ]
    return {
        "text": result.output_text,
        "calls": calls,
        "usage": (result.usage.input_tokens, result.usage.output_tokens),
        "finish": "tool_calls" if calls else result.status,
        "json": _raw(out, stream).decode(),
    }


def _anthropic_messages(out: Any, stream: bool) -> dict[str, Any]:
    if not stream:
        assert out["type"] == "message" and out["model"] == LOGICAL and isinstance(out["content"], list)
    client = anthropic.Anthropic(
        api_key="k", base_url="http://gw", http_client=_transport(_raw(out, stream), stream, anthropic)
    )
    args = {"model": LOGICAL, "max_tokens": 100, "messages": [{"role": "user", "content": "x"}]}
    if stream:
        with client.messages.stream(**args) as s:
            result = s.get_final_message()
    else:
        result = client.messages.create(**args)
    text = "".join(b.text for b in result.content if b.type == "text")
    calls = [(b.id, b.name, b.input) for b in result.content if b.type == "tool_use"]
    return {
        "text": text,
        "calls": calls,
        "usage": (result.usage.input_tokens, result.usage.output_tokens),
        "finish": result.stop_reason,
        "json": _raw(out, stream).decode(),
    }


# -- the grid -----------------------------------------------------------------------------------

CELLS = [
    (c, u, s, st)
    for c in MATRIX_CLIENTS
    for u in UPSTREAM_PROTOCOLS
    for s in SCENARIOS
    for st in (False, True)
]


@pytest.mark.parametrize(
    "client,upstream,scenario,stream",
    CELLS,
    ids=[f"{c}->{u}-{s}-{'stream' if st else 'json'}" for c, u, s, st in CELLS],
)
def test_cell(client, upstream, scenario, stream):
    _, out = run_cell(client, upstream, scenario, stream)
    view = client_view(client, out, stream)
    expected = reply_for(scenario)
    if expected["text"]:
        assert view["text"].strip() == REPLY_TEXT
    assert view["calls"] == [(cid, name, args) for cid, name, args in expected["calls"]], "two parallel calls"
    if expected["calls"]:
        assert view["finish"] in ("tool_calls", "tool_use")
    assert view["usage"] == (USAGE_IN, USAGE_OUT)
    if expected["reasoning"]:
        assert (GEMINI_SIG if upstream == "gemini" else SIG) in view["json"], (
            "the signature reaches the client"
        )
    assert "_gw_" not in view["json"]


# -- same-protocol losslessness -------------------------------------------------------------------

SAME = [(p, s, st) for p in MATRIX_CLIENTS for s in SCENARIOS for st in (False, True)]


@pytest.mark.parametrize(
    "proto,scenario,stream", SAME, ids=[f"{p}-{s}-{'stream' if st else 'json'}" for p, s, st in SAME]
)
def test_same_protocol_request_is_lossless(proto, scenario, stream):
    cdc = codec(proto)
    body = CLIENT_BODIES[proto](scenario, stream)
    attempt = clone(cdc.decode_request(copy.deepcopy(body)))
    prepare_for_upstream(
        attempt, upstream_protocol=proto, source_protocol=proto, strip_nested=True, extra_whitelist=None
    )
    sent = cdc.encode_request(attempt, EncodeContext(model=LOGICAL, source_protocol=proto))
    assert sent == (wire_body(body) if proto == "gemini" else body)  # Gemini: model and stream are in the URL


@pytest.mark.parametrize("proto,scenario", [(p, s) for p in MATRIX_CLIENTS for s in SCENARIOS])
def test_same_protocol_response_is_lossless(proto, scenario):
    cdc = codec(proto)
    reply = UPSTREAM_REPLIES[proto](reply_for(scenario), False)
    out = cdc.encode_response(
        cdc.decode_response(copy.deepcopy(reply)), EncodeContext(model=UPSTREAM_MODEL, source_protocol=proto)
    )
    assert out == reply
