"""Legacy text completions (``POST /v1/completions``), client side only (reference
protocols.md §6.1): translated to a Chat Completions request and answered as
``text_completion`` choices, whole or streamed.

- ``prompt``: a string, or an array holding exactly one string; it becomes one user message.
  Token arrays and several prompts (a batch) are refused.
- ``suffix``, ``echo``, ``best_of`` and ``logprobs`` are refused with a 400 naming the field
  (``echo: false``, ``best_of: 1`` and ``logprobs: null``/``0`` ask for nothing and pass);
  they have no chat equivalent.
- Everything else (``max_tokens``, ``temperature``, ``stop``, ``stream_options``, ...) is what
  a chat request takes, so it goes through the Chat codec unchanged.

The response side reuses the Chat encoders and rewrites their output: a ``text_completion``
object whose choice carries ``text`` (the assistant message's content), ``logprobs: null`` and
the finish reason; stream chunks the same way, with ``data: [DONE]`` at the end as OpenAI does.
"""

from __future__ import annotations

from typing import Any

import orjson

from gateway.errors import ProtocolError
from gateway.urp import Request, Response

from . import chat
from .base import EncodeContext

PROTOCOL = "completions"
_REFUSED = ("suffix", "echo", "best_of", "logprobs")


def _harmless(name: str, value: Any) -> bool:
    """A refused field set to the value that asks for nothing."""
    if value is None:
        return True
    if name == "echo":
        return value is False
    return not isinstance(value, bool) and value == (1 if name == "best_of" else 0)


def to_chat_body(body: dict[str, Any]) -> dict[str, Any]:
    """The chat request a legacy completion request stands for; raises ProtocolError."""
    for name in _REFUSED:
        if _harmless(name, body.get(name)):
            continue
        raise ProtocolError(
            f"{name} is not supported on /v1/completions (it has no chat equivalent)", param=name
        )
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        prompt = prompt[0]
    if not isinstance(prompt, str):
        raise ProtocolError("prompt must be a string or an array of exactly one string", param="prompt")
    out = {k: v for k, v in body.items() if k not in ("prompt", *_REFUSED)}
    out["messages"] = [{"role": "user", "content": prompt}]
    return out


def decode_request(body: dict[str, Any]) -> Request:
    return chat.decode_request(to_chat_body(body))


def _completion_id(chat_id: Any) -> str:
    text = chat_id if isinstance(chat_id, str) else ""
    return "cmpl-" + (text[len("chatcmpl-") :] if text.startswith("chatcmpl-") else text)


def _choice(choice: dict[str, Any], text: str) -> dict[str, Any]:
    return {
        "text": text,
        "index": choice.get("index", 0),
        "logprobs": None,
        "finish_reason": choice.get("finish_reason"),
    }


def from_chat_object(obj: dict[str, Any]) -> dict[str, Any]:
    """A ``chat.completion`` (or chunk) object -> the ``text_completion`` object."""
    choices = []
    for choice in obj.get("choices") or []:
        if not isinstance(choice, dict):
            continue
        holder = choice.get("message") if isinstance(choice.get("message"), dict) else choice.get("delta")
        content = holder.get("content") if isinstance(holder, dict) else None
        choices.append(_choice(choice, content if isinstance(content, str) else ""))
    out: dict[str, Any] = {
        "id": _completion_id(obj.get("id")),
        "object": "text_completion",
        "created": obj.get("created"),
        "model": obj.get("model"),
        "choices": choices,
    }
    if obj.get("usage") is not None:
        out["usage"] = obj["usage"]
    if obj.get("system_fingerprint") is not None:
        out["system_fingerprint"] = obj["system_fingerprint"]
    return out


def encode_response(resp: Response, ctx: EncodeContext) -> dict:
    return from_chat_object(chat.encode_response(resp, ctx))


class StreamEncoder:
    """The Chat stream encoder with every chunk rewritten to a ``text_completion`` chunk. Chunks
    that say nothing a completion client can see (the role-only first chunk, tool-call
    fragments) are dropped; errors, keep-alives and ``[DONE]`` pass unchanged."""

    def __init__(self, ctx: EncodeContext) -> None:
        self._inner = chat.StreamEncoder(ctx)

    @staticmethod
    def _rewrite(data: bytes) -> bytes:
        if not data:
            return data
        out: list[bytes] = []
        for frame in data.split(b"\n\n"):
            if not frame:
                continue
            if not frame.startswith(b"data: ") or frame == b"data: [DONE]":
                out.append(frame + b"\n\n")
                continue
            try:
                obj = orjson.loads(frame[6:])
            except orjson.JSONDecodeError:
                out.append(frame + b"\n\n")
                continue
            if not isinstance(obj, dict) or "error" in obj or obj.get("object") != "chat.completion.chunk":
                out.append(frame + b"\n\n")
                continue
            converted = from_chat_object(obj)
            if "usage" not in converted and all(
                c["text"] == "" and c["finish_reason"] is None for c in converted["choices"]
            ):
                continue
            out.append(b"data: " + orjson.dumps(converted) + b"\n\n")
        return b"".join(out)

    def encode(self, event: Any) -> bytes:
        return self._rewrite(self._inner.encode(event))

    def keepalive(self) -> bytes:
        return self._inner.keepalive()

    def error(self, status: int, code: str, message: str) -> bytes:
        return self._inner.error(status, code, message)

    def close(self) -> bytes:
        return self._rewrite(self._inner.close())


error_body = chat.error_body

__all__ = ["PROTOCOL", "StreamEncoder", "decode_request", "encode_response", "error_body", "to_chat_body"]
