"""One conversational turn through the gateway with an official SDK, per client protocol.

Each client protocol gets a ``Conversation`` that speaks through its SDK (``openai`` for Chat
Completions and Responses, ``anthropic`` for Messages), stream or not, and reduces what came back
to a protocol-neutral ``TurnResult`` (text, tool calls with parsed arguments, usage) so the
matrix can assert the same things for every cell. Streams are consumed through the SDKs' own
stream helpers or raw event iterators, so a malformed lifecycle fails inside the SDK.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import anthropic
import openai

WEATHER_SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
WEATHER_ARGS = {"city": "mock-city"}  # what the mock upstream builds from WEATHER_SCHEMA
TIME_SCHEMA = {"type": "object", "properties": {"zone": {"type": "string"}}, "required": ["zone"]}
TIME_ARGS = {"zone": "mock-zone"}
TOOL_SCHEMAS = {"get_weather": WEATHER_SCHEMA, "get_time": TIME_SCHEMA}


@dataclass
class ToolCallSeen:
    call_id: str
    name: str
    arguments: Any  # parsed JSON


@dataclass
class TurnResult:
    text: str = ""
    tool_calls: list[ToolCallSeen] = field(default_factory=list)
    input_tokens: int = 0
    output_tokens: int = 0
    finish: str = ""
    model: str = ""
    reasoning_text: str = ""  # readable reasoning (summary or raw) as the client sees it
    reasoning_opaque: list[str] = field(default_factory=list)  # signatures / encrypted payloads
    raw: Any = None


class Conversation:
    """A conversation in one client protocol; ``ask`` sends a user turn, ``answer_tools`` the results."""

    protocol = ""

    def __init__(
        self, base_url: str, api_key: str, model: str, *, stream: bool, tools: tuple[str, ...] = ()
    ) -> None:
        """``tools``: names from ``TOOL_SCHEMAS`` offered on every turn."""
        self.base_url, self.api_key, self.model, self.stream = base_url, api_key, model, stream
        self.tool_names = tools
        self.history: list[Any] = []

    def ask(self, text: str) -> TurnResult:
        raise NotImplementedError

    def answer_tools(self, results: dict[str, str]) -> TurnResult:
        raise NotImplementedError


# -- OpenAI Chat Completions -------------------------------------------------------------------------


class ChatConversation(Conversation):
    protocol = "chat_completion"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.client = openai.OpenAI(
            base_url=self.base_url + "/v1", api_key=self.api_key, max_retries=0, timeout=30
        )

    def _tools(self) -> dict[str, Any]:
        if not self.tool_names:
            return {}
        return {
            "tools": [
                {
                    "type": "function",
                    "function": {
                        "name": name,
                        "description": f"{name} tool",
                        "parameters": TOOL_SCHEMAS[name],
                    },
                }
                for name in self.tool_names
            ]
        }

    def _send(self) -> TurnResult:
        if not self.stream:
            completion = self.client.chat.completions.create(
                model=self.model, messages=self.history, **self._tools()
            )
            message = completion.choices[0].message
            result = TurnResult(
                text=message.content or "",
                finish=completion.choices[0].finish_reason,
                model=completion.model,
                raw=completion,
                input_tokens=completion.usage.prompt_tokens,
                output_tokens=completion.usage.completion_tokens,
            )
            for call in message.tool_calls or []:
                result.tool_calls.append(
                    ToolCallSeen(call.id, call.function.name, json.loads(call.function.arguments))
                )
            extra = message.model_extra or {}
            details = list(extra.get("reasoning_details") or [])
            _read_chat_reasoning(result, details, extra)
        else:
            chunks = list(
                self.client.chat.completions.create(
                    model=self.model,
                    messages=self.history,
                    stream=True,
                    stream_options={"include_usage": True},
                    **self._tools(),
                )
            )
            result = TurnResult(raw=chunks, model=chunks[0].model)
            calls: dict[int, dict[str, str]] = {}
            finishes = []
            details = []
            scalars: dict[str, str] = {}
            for chunk in chunks:
                if chunk.usage is not None:
                    result.input_tokens = chunk.usage.prompt_tokens
                    result.output_tokens = chunk.usage.completion_tokens
                if not chunk.choices:
                    continue
                choice = chunk.choices[0]
                if choice.finish_reason:
                    finishes.append(choice.finish_reason)
                result.text += choice.delta.content or ""
                delta_extra = choice.delta.model_extra or {}
                details.extend(delta_extra.get("reasoning_details") or [])
                for key in ("reasoning", "reasoning_content"):
                    if isinstance(delta_extra.get(key), str):
                        scalars[key] = scalars.get(key, "") + delta_extra[key]
                for tc in choice.delta.tool_calls or []:
                    slot = calls.setdefault(tc.index, {"id": "", "name": "", "arguments": ""})
                    slot["id"] = tc.id or slot["id"]
                    if tc.function is not None:
                        slot["name"] = tc.function.name or slot["name"]
                        slot["arguments"] += tc.function.arguments or ""
            assert len(finishes) == 1, f"expected exactly one finish chunk, got {finishes}"
            result.finish = finishes[0]
            result.tool_calls = [
                ToolCallSeen(c["id"], c["name"], json.loads(c["arguments"])) for _, c in sorted(calls.items())
            ]
            _read_chat_reasoning(result, details, scalars)
            details = _merge_stream_details(details)
        assistant: dict[str, Any] = {"role": "assistant", "content": result.text or None}
        if details:
            assistant["reasoning_details"] = details  # OpenRouter-style replay of reasoning
        if result.tool_calls:
            assistant["tool_calls"] = [
                {
                    "id": c.call_id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": json.dumps(c.arguments)},
                }
                for c in result.tool_calls
            ]
        self.history.append(assistant)
        return result

    def ask(self, text: str) -> TurnResult:
        self.history.append({"role": "user", "content": text})
        return self._send()

    def answer_tools(self, results: dict[str, str]) -> TurnResult:
        for call_id, output in results.items():
            self.history.append({"role": "tool", "tool_call_id": call_id, "content": output})
        return self._send()


def _read_chat_reasoning(result: TurnResult, details: list[dict[str, Any]], scalars: dict[str, Any]) -> None:
    """Chat carries reasoning as OpenRouter ``reasoning_details`` (text / summary / encrypted
    entries), or as a scalar ``reasoning`` / ``reasoning_content``."""
    for entry in details:
        kind = entry.get("type")
        if kind == "reasoning.encrypted" and entry.get("data"):
            result.reasoning_opaque.append(entry["data"])
        elif kind in ("reasoning.text", "reasoning.summary"):
            result.reasoning_text += entry.get("text") or entry.get("summary") or ""
            if entry.get("signature"):
                result.reasoning_opaque.append(entry["signature"])
    if not result.reasoning_text:
        result.reasoning_text = scalars.get("reasoning") or scalars.get("reasoning_content") or ""


def _merge_stream_details(fragments: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Fold streamed ``reasoning_details`` fragments into whole entries (same type and index)."""
    merged: list[dict[str, Any]] = []
    for fragment in fragments:
        last = merged[-1] if merged else None
        if (
            last is not None
            and last.get("type") == fragment.get("type")
            and last.get("index") == fragment.get("index")
            and fragment.get("type") != "reasoning.encrypted"
        ):
            for key in ("text", "summary"):
                if isinstance(fragment.get(key), str):
                    last[key] = last.get(key, "") + fragment[key]
            if fragment.get("signature"):
                last["signature"] = fragment["signature"]
        else:
            merged.append(dict(fragment))
    return merged


# -- OpenAI Responses ----------------------------------------------------------------------------------


class ResponsesConversation(Conversation):
    protocol = "responses"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.client = openai.OpenAI(
            base_url=self.base_url + "/v1", api_key=self.api_key, max_retries=0, timeout=30
        )

    def _tools(self) -> dict[str, Any]:
        if not self.tool_names:
            return {}
        return {
            "tools": [
                {
                    "type": "function",
                    "name": name,
                    "description": f"{name} tool",
                    "parameters": TOOL_SCHEMAS[name],
                }
                for name in self.tool_names
            ]
        }

    def _send(self) -> TurnResult:
        if not self.stream:
            response = self.client.responses.create(model=self.model, input=self.history, **self._tools())
        else:
            with self.client.responses.stream(
                model=self.model, input=self.history, **self._tools()
            ) as stream:
                events = list(stream)
                response = stream.get_final_response()
            numbers = [e.sequence_number for e in events]
            assert numbers == sorted(set(numbers)), "sequence_number must strictly increase"
            assert events[-1].type == "response.completed", events[-1].type
        result = TurnResult(
            text=response.output_text,
            finish=response.status,
            model=response.model,
            raw=response,
            input_tokens=response.usage.input_tokens,
            output_tokens=response.usage.output_tokens,
        )
        for item in response.output:
            if item.type == "function_call":
                result.tool_calls.append(ToolCallSeen(item.call_id, item.name, json.loads(item.arguments)))
                self.history.append(
                    {
                        "type": "function_call",
                        "call_id": item.call_id,
                        "name": item.name,
                        "arguments": item.arguments,
                    }
                )
            elif item.type == "message":
                self.history.append({"role": "assistant", "content": result.text})
            elif item.type == "reasoning":
                result.reasoning_text += "".join(part.text for part in item.summary or [])
                result.reasoning_text += "".join(part.text for part in item.content or [])
                if item.encrypted_content:
                    result.reasoning_opaque.append(item.encrypted_content)
                self.history.append(item.model_dump(exclude_none=True))
        return result

    def ask(self, text: str) -> TurnResult:
        self.history.append({"role": "user", "content": text})
        return self._send()

    def answer_tools(self, results: dict[str, str]) -> TurnResult:
        for call_id, output in results.items():
            self.history.append({"type": "function_call_output", "call_id": call_id, "output": output})
        return self._send()


# -- Anthropic Messages --------------------------------------------------------------------------------


class MessagesConversation(Conversation):
    protocol = "messages"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.client = anthropic.Anthropic(
            base_url=self.base_url, api_key=self.api_key, max_retries=0, timeout=30
        )

    def _tools(self) -> dict[str, Any]:
        if not self.tool_names:
            return {}
        return {
            "tools": [
                {"name": name, "description": f"{name} tool", "input_schema": TOOL_SCHEMAS[name]}
                for name in self.tool_names
            ]
        }

    def _send(self) -> TurnResult:
        if not self.stream:
            message = self.client.messages.create(
                model=self.model, max_tokens=1024, messages=self.history, **self._tools()
            )
        else:
            with self.client.messages.stream(
                model=self.model, max_tokens=1024, messages=self.history, **self._tools()
            ) as stream:
                message = stream.get_final_message()
        result = TurnResult(
            finish=message.stop_reason or "",
            model=message.model,
            raw=message,
            input_tokens=message.usage.input_tokens,
            output_tokens=message.usage.output_tokens,
        )
        content = []
        for block in message.content:
            if block.type == "text":
                result.text += block.text
                content.append({"type": "text", "text": block.text})
            elif block.type == "tool_use":
                result.tool_calls.append(ToolCallSeen(block.id, block.name, block.input))
                content.append({"type": "tool_use", "id": block.id, "name": block.name, "input": block.input})
            elif block.type == "thinking":
                result.reasoning_text += block.thinking
                if block.signature:
                    result.reasoning_opaque.append(block.signature)
                content.append({"type": "thinking", "thinking": block.thinking, "signature": block.signature})
            elif block.type == "redacted_thinking":
                result.reasoning_opaque.append(block.data)
                content.append({"type": "redacted_thinking", "data": block.data})
        self.history.append({"role": "assistant", "content": content})
        return result

    def ask(self, text: str) -> TurnResult:
        self.history.append({"role": "user", "content": text})
        return self._send()

    def answer_tools(self, results: dict[str, str]) -> TurnResult:
        self.history.append(
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": call_id, "content": output}
                    for call_id, output in results.items()
                ],
            }
        )
        return self._send()


CONVERSATIONS: dict[str, type[Conversation]] = {
    "chat_completion": ChatConversation,
    "responses": ResponsesConversation,
    "messages": MessagesConversation,
}


# -- Gemini (google-genai) ------------------------------------------------------------------------------


class GeminiConversation(Conversation):
    """Gemini as a client (issue 19) through the ``google-genai`` SDK, ``generateContent`` or
    ``generateContentStream`` (``alt=sse``). The model's parts (thoughts with their signatures,
    function calls) are replayed as the SDK returned them, merged per kind when streamed."""

    protocol = "gemini"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        from google import genai
        from google.genai import types

        super().__init__(*args, **kwargs)
        self.types = types
        self.client = genai.Client(
            api_key=self.api_key, http_options=types.HttpOptions(base_url=self.base_url, timeout=30_000)
        )
        self.names: dict[str, str] = {}

    def _config(self) -> Any:
        types = self.types
        decls = [
            types.FunctionDeclaration(
                name=name, description=f"{name} tool", parameters_json_schema=TOOL_SCHEMAS[name]
            )
            for name in self.tool_names
        ]
        return types.GenerateContentConfig(
            tools=[types.Tool(function_declarations=decls)] if decls else None,
            automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
        )

    def _send(self) -> TurnResult:
        types = self.types
        if self.stream:
            chunks = list(
                self.client.models.generate_content_stream(
                    model=self.model, contents=self.history, config=self._config()
                )
            )
        else:
            chunks = [
                self.client.models.generate_content(
                    model=self.model, contents=self.history, config=self._config()
                )
            ]
        result = TurnResult(raw=chunks)
        parts: list[Any] = []
        for chunk in chunks:
            if chunk.usage_metadata is not None:
                result.input_tokens = chunk.usage_metadata.prompt_token_count or 0
                result.output_tokens = (chunk.usage_metadata.candidates_token_count or 0) + (
                    chunk.usage_metadata.thoughts_token_count or 0
                )
            result.model = chunk.model_version or result.model
            for candidate in chunk.candidates or []:
                if candidate.finish_reason is not None:
                    result.finish = candidate.finish_reason.name
                for part in (candidate.content.parts if candidate.content else None) or []:
                    last = parts[-1] if parts else None
                    if part.function_call is not None:
                        call = part.function_call
                        result.tool_calls.append(
                            ToolCallSeen(call.id or "", call.name or "", dict(call.args or {}))
                        )
                        self.names[call.id or ""] = call.name or ""
                        parts.append(part)
                    elif part.text is not None or part.thought_signature:
                        kind = bool(part.thought)
                        if part.thought:
                            result.reasoning_text += part.text or ""
                        else:
                            result.text += part.text or ""
                        if part.thought_signature:
                            result.reasoning_opaque.append(
                                part.thought_signature.decode("latin-1")
                                if isinstance(part.thought_signature, bytes)
                                else str(part.thought_signature)
                            )
                        if (
                            last is not None
                            and last.function_call is None
                            and bool(last.thought) == kind
                            and not last.thought_signature
                        ):
                            parts[-1] = types.Part(
                                text=(last.text or "") + (part.text or ""),
                                thought=last.thought,
                                thought_signature=part.thought_signature,
                            )
                        else:
                            parts.append(
                                types.Part(
                                    text=part.text or "",
                                    thought=part.thought,
                                    thought_signature=part.thought_signature,
                                )
                            )
        if result.tool_calls:
            result.finish = "tool_calls"
        self.history.append(
            types.Content(
                role="model",
                parts=[p for p in parts if p.function_call is not None or p.text or p.thought_signature],
            )
        )
        return result

    def ask(self, text: str) -> TurnResult:
        self.history.append(self.types.Content(role="user", parts=[self.types.Part(text=text)]))
        return self._send()

    def answer_tools(self, results: dict[str, str]) -> TurnResult:
        types = self.types
        self.history.append(
            types.Content(
                role="user",
                parts=[
                    types.Part(
                        function_response=types.FunctionResponse(
                            id=call_id, name=self.names.get(call_id, ""), response={"result": output}
                        )
                    )
                    for call_id, output in results.items()
                ],
            )
        )
        return self._send()


CONVERSATIONS["gemini"] = GeminiConversation
