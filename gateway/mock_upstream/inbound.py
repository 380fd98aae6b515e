"""Read what the mock needs from a request body, one function per upstream protocol.

The mock only needs a protocol-neutral summary (``Inbound``): the last user text, whether the
conversation ends with tool results (and their text), the tools offered, whether reasoning was
asked for, and the stream flags. Parsing is deliberately lenient: the mock is a peer for tests,
not a validator, and a body it does not understand simply yields an empty summary.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson


@dataclass(slots=True)
class OfferedTool:
    name: str
    kind: str = "function"  # "function" or "custom" (freeform input)
    schema: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class Inbound:
    model: str = ""
    stream: bool = False
    include_usage: bool = False
    last_user_text: str = ""
    tool_results: list[str] = field(default_factory=list)  # non-empty when the last input is tool output
    tools: list[OfferedTool] = field(default_factory=list)
    reasoning_requested: bool = False
    input_chars: int = 0


def _text_of(content: Any) -> str:
    """Concatenate the text found in a string, a list of parts/blocks, or a dict."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(_text_of(part) for part in content)
    if isinstance(content, dict):
        for key in ("text", "output", "result", "content"):
            if key in content and isinstance(content[key], (str, list)):
                return _text_of(content[key])
        if "response" in content:  # Gemini functionResponse
            response = content["response"]
            if isinstance(response, dict):
                for key in ("result", "output", "content"):
                    if key in response:
                        value = response[key]
                        return value if isinstance(value, str) else orjson.dumps(value).decode()
                return orjson.dumps(response).decode()
            return str(response)
    return ""


def _effort_on(value: Any) -> bool:
    return isinstance(value, str) and value not in ("", "none")


def from_chat(body: dict[str, Any]) -> Inbound:
    out = Inbound(model=str(body.get("model", "")), stream=bool(body.get("stream")))
    stream_options = body.get("stream_options")
    out.include_usage = isinstance(stream_options, dict) and bool(stream_options.get("include_usage"))
    messages = body.get("messages") or []
    trailing: list[str] = []
    for message in reversed(messages):
        if not isinstance(message, dict) or message.get("role") not in ("tool", "function"):
            break
        trailing.append(_text_of(message.get("content")))
    out.tool_results = list(reversed(trailing))
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "user":
            out.last_user_text = _text_of(message.get("content"))
            break
    for tool in body.get("tools") or []:
        if not isinstance(tool, dict):
            continue
        if tool.get("type") == "custom" and isinstance(tool.get("custom"), dict):
            out.tools.append(OfferedTool(str(tool["custom"].get("name", "")), "custom"))
        elif isinstance(tool.get("function"), dict):
            fn = tool["function"]
            out.tools.append(OfferedTool(str(fn.get("name", "")), "function", fn.get("parameters") or {}))
    for fn in body.get("functions") or []:
        if isinstance(fn, dict):
            out.tools.append(OfferedTool(str(fn.get("name", "")), "function", fn.get("parameters") or {}))
    reasoning = body.get("reasoning")
    out.reasoning_requested = (
        _effort_on(body.get("reasoning_effort"))
        or (
            isinstance(reasoning, dict)
            and (_effort_on(reasoning.get("effort")) or bool(reasoning.get("max_tokens")))
        )
        or (isinstance(body.get("thinking"), dict) and body["thinking"].get("type") == "enabled")
    )
    return out


def from_responses(body: dict[str, Any]) -> Inbound:
    out = Inbound(model=str(body.get("model", "")), stream=bool(body.get("stream")), include_usage=True)
    items = body.get("input")
    if isinstance(items, str):
        out.last_user_text = items
        items = []
    elif isinstance(items, dict):
        items = [items]
    items = items or []
    trailing: list[str] = []
    for item in reversed(items):
        if not isinstance(item, dict) or item.get("type") not in (
            "function_call_output",
            "custom_tool_call_output",
        ):
            break
        trailing.append(_text_of(item.get("output")))
    out.tool_results = list(reversed(trailing))
    for item in reversed(items):
        if isinstance(item, dict) and item.get("role") == "user" and item.get("type", "message") == "message":
            out.last_user_text = _text_of(item.get("content"))
            break
    for tool in body.get("tools") or []:
        if not isinstance(tool, dict):
            continue
        if tool.get("type") == "function":
            out.tools.append(OfferedTool(str(tool.get("name", "")), "function", tool.get("parameters") or {}))
        elif tool.get("type") == "custom":
            out.tools.append(OfferedTool(str(tool.get("name", "")), "custom"))
    reasoning = body.get("reasoning")
    out.reasoning_requested = isinstance(reasoning, dict) and _effort_on(reasoning.get("effort"))
    return out


def from_messages(body: dict[str, Any]) -> Inbound:
    out = Inbound(model=str(body.get("model", "")), stream=bool(body.get("stream")), include_usage=True)
    messages = body.get("messages") or []
    if messages and isinstance(messages[-1], dict) and messages[-1].get("role") == "user":
        content = messages[-1].get("content")
        if isinstance(content, list):
            out.tool_results = [
                _text_of(block.get("content"))
                for block in content
                if isinstance(block, dict) and block.get("type") == "tool_result"
            ]
    for message in reversed(messages):
        if not isinstance(message, dict) or message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, list):
            text = "".join(
                b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text"
            )
        else:
            text = _text_of(content)
        if text:
            out.last_user_text = text
            break
    for tool in body.get("tools") or []:
        if isinstance(tool, dict) and tool.get("type") in (None, "custom") and tool.get("name"):
            out.tools.append(OfferedTool(str(tool["name"]), "function", tool.get("input_schema") or {}))
    thinking = body.get("thinking")
    out.reasoning_requested = isinstance(thinking, dict) and thinking.get("type") in ("enabled", "adaptive")
    return out


def from_gemini(body: dict[str, Any], model: str, stream: bool) -> Inbound:
    out = Inbound(model=model, stream=stream, include_usage=True)
    contents = body.get("contents") or []
    if contents and isinstance(contents[-1], dict):
        parts = contents[-1].get("parts") or []
        out.tool_results = [
            _text_of(p["functionResponse"])
            for p in parts
            if isinstance(p, dict) and isinstance(p.get("functionResponse"), dict)
        ]
    for content in reversed(contents):
        if not isinstance(content, dict) or content.get("role", "user") != "user":
            continue
        text = "".join(
            p.get("text", "")
            for p in content.get("parts") or []
            if isinstance(p, dict) and isinstance(p.get("text"), str)
        )
        if text:
            out.last_user_text = text
            break
    for group in body.get("tools") or []:
        for decl in (
            (group.get("functionDeclarations") or group.get("function_declarations") or [])
            if isinstance(group, dict)
            else []
        ):
            if isinstance(decl, dict):
                schema = decl.get("parameters") or decl.get("parametersJsonSchema") or {}
                out.tools.append(OfferedTool(str(decl.get("name", "")), "function", schema))
    config = body.get("generationConfig") or {}
    thinking = config.get("thinkingConfig") if isinstance(config, dict) else None
    out.reasoning_requested = isinstance(thinking, dict) and (
        bool(thinking.get("includeThoughts"))
        or (thinking.get("thinkingBudget") or 0) > 0
        or _effort_on(thinking.get("thinkingLevel"))
    )
    return out
