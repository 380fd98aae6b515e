"""What the mock answers: a protocol-neutral ``Turn`` planned from an ``Inbound`` summary.

Rules, in order (all deterministic, so tests can assert exact text):

1. a scripted turn is queued (``POST /_mock/script``) → return it;
2. the request ends with tool results → ``Tool said: <result text>`` (several results joined by
   `` | ``);
3. tools are offered and the last user text says ``call two tools`` → two parallel calls (the first
   two tools, or the only tool twice); ``call <toolname>`` → that tool; ``use a tool`` → the first;
4. otherwise → ``Echo: <last user text>``.

Reasoning is added when the request asks for it (effort / thinking enabled) or the text contains
"think"; it carries an opaque payload (an encrypted blob / signature) derived from its text.
"""

from __future__ import annotations

import base64
import hashlib
import re
from dataclasses import dataclass, field
from typing import Any

import orjson

from gateway.mock_upstream.inbound import Inbound, OfferedTool


@dataclass(slots=True)
class ToolCall:
    name: str
    arguments: str  # JSON text for function tools, raw input for custom tools
    call_id: str
    kind: str = "function"

    @property
    def arguments_obj(self) -> Any:
        try:
            return orjson.loads(self.arguments)
        except orjson.JSONDecodeError:
            return {"_raw": self.arguments}


@dataclass(slots=True)
class Turn:
    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    reasoning: str = ""
    reasoning_signature: str = ""
    input_tokens: int = 1
    output_tokens: int = 1
    reasoning_tokens: int = 0
    image_b64: str = ""  # Responses: an image_generation_call result (request offered image_generation)
    cache_read_tokens: int = 0  # part of input_tokens (OpenAI semantics); see prompt_cache
    cache_write_tokens: int = 0

    @property
    def finish(self) -> str:
        """Protocol-neutral finish: "tool_calls" or "stop"."""
        return "tool_calls" if self.tool_calls else "stop"


def short_id(*parts: str, n: int = 24) -> str:
    """A deterministic id fragment from the given parts."""
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:n]


def signature_for(reasoning: str) -> str:
    """The opaque payload (signature / encrypted content) the mock attaches to this reasoning text,
    so tests can check it comes back unchanged on a replay."""
    return base64.b64encode(b"mock-signature:" + hashlib.sha256(reasoning.encode()).digest()).decode()


def value_for_schema(schema: Any, name: str) -> Any:
    """A small deterministic value that satisfies a (simple) JSON schema."""
    if not isinstance(schema, dict):
        return f"mock-{name}"
    if schema.get("enum"):
        return schema["enum"][0]
    if "const" in schema:
        return schema["const"]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    if isinstance(kind, str):
        kind = kind.lower()  # Gemini schemas use upper-case type names
    if kind == "integer":
        return 1
    if kind == "number":
        return 1.5
    if kind == "boolean":
        return True
    if kind == "array":
        return [value_for_schema(schema.get("items"), name)] if isinstance(schema.get("items"), dict) else []
    if kind == "object" or "properties" in schema:
        props = schema.get("properties") or {}
        return {key: value_for_schema(sub, key) for key, sub in props.items()}
    return f"mock-{name}"


def arguments_for(tool: OfferedTool) -> str:
    if tool.kind == "custom":
        return f"raw input for {tool.name}"
    return orjson.dumps(value_for_schema(tool.schema or {"type": "object"}, tool.name)).decode()


_CALL_RE = re.compile(r"\bcall\s+([A-Za-z0-9_.:\-]+)", re.IGNORECASE)


def _choose_tools(inbound: Inbound) -> list[OfferedTool]:
    tools = [t for t in inbound.tools if t.name]
    if not tools:
        return []
    text = inbound.last_user_text.lower()
    if "call two tools" in text:
        return tools[:2] if len(tools) >= 2 else [tools[0], tools[0]]
    by_name = {t.name: t for t in tools}
    for match in _CALL_RE.finditer(inbound.last_user_text):
        word = match.group(1).rstrip(".,:;!?")
        if word in by_name:
            return [by_name[word]]
    if "use a tool" in text:
        return [tools[0]]
    return []


def estimate_tokens(chars: int) -> int:
    """Roughly four characters per token, never zero."""
    return max(1, (chars + 3) // 4)


def plan_turn(inbound: Inbound, scripted: dict[str, Any] | None = None) -> Turn:
    """Decide the answer for this request."""
    turn = Turn()
    if scripted is not None:
        turn.text = str(scripted.get("text") or "")
        for i, call in enumerate(scripted.get("tool_calls") or []):
            args = call.get("arguments", {})
            kind = call.get("kind", "function")
            args_text = args if isinstance(args, str) else orjson.dumps(args).decode()
            turn.tool_calls.append(
                ToolCall(
                    str(call["name"]),
                    args_text,
                    call.get("id") or f"call_{short_id('script', str(i), args_text)}",
                    kind,
                )
            )
        turn.reasoning = str(scripted.get("reasoning") or "")
    elif inbound.tool_results:
        turn.text = "Tool said: " + " | ".join(inbound.tool_results)
    else:
        chosen = _choose_tools(inbound)
        for i, tool in enumerate(chosen):
            args = arguments_for(tool)
            turn.tool_calls.append(
                ToolCall(
                    tool.name, args, f"call_{short_id(inbound.last_user_text, tool.name, str(i))}", tool.kind
                )
            )
        if not chosen:
            turn.text = f"Echo: {inbound.last_user_text}"
    if scripted is None and (inbound.reasoning_requested or "think" in inbound.last_user_text.lower()):
        turn.reasoning = f"Thinking about: {inbound.last_user_text[:60]}"
    if turn.reasoning:
        turn.reasoning_signature = signature_for(turn.reasoning)
        turn.reasoning_tokens = estimate_tokens(len(turn.reasoning))
    visible = len(turn.text) + sum(len(c.name) + len(c.arguments) for c in turn.tool_calls)
    turn.input_tokens = estimate_tokens(inbound.input_chars)
    turn.output_tokens = estimate_tokens(visible) + turn.reasoning_tokens
    return turn


def split_text(text: str, size: int) -> list[str]:
    """Split into fragments of at most ``size`` characters (at least one fragment)."""
    size = max(1, size)
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def split_words(text: str) -> list[str]:
    """Split text into word-ish fragments that keep their trailing spaces (how models stream)."""
    parts = re.findall(r"\S+\s*|\s+", text)
    return parts or [""]
