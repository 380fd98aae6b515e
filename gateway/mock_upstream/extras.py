"""Mock answers for the non-generation endpoints the gateway forwards (issue 19):
``/v1/embeddings`` (OpenAI shape), Gemini ``:embedContent`` / ``:batchEmbedContents``,
``/v1/completions`` (legacy text completion echo) and ``/v1/responses/compact``.

Embedding vectors are deterministic: 8 floats derived from the input's SHA-256, so tests can
compare what the client got with what the mock computes (``vector_for``)."""

from __future__ import annotations

import base64
import hashlib
import math
import re
import struct
import time
from typing import Any

from gateway.mock_upstream.behaviour import short_id

DIMENSIONS = 8
_GEMINI_EMBED = re.compile(r"^/(?:v1beta|v1)/models/(.+?):(embedContent|batchEmbedContents)$")


def vector_for(text: str, dims: int = DIMENSIONS) -> list[float]:
    """Deterministic vector for ``text``: multiples of 1/128, exact in float32 (base64 too)."""
    digest = hashlib.sha256(text.encode()).digest()
    return [(digest[i % 32] - 128) / 128.0 for i in range(dims)]


def _tokens(text: str) -> int:
    return max(1, math.ceil(len(text) / 4))


def _openai_embeddings(body: dict[str, Any]) -> tuple[int, Any]:
    value = body.get("input")
    inputs = [value] if isinstance(value, str) else value
    if not isinstance(inputs, list) or not inputs or not all(isinstance(v, str) for v in inputs):
        return 400, {
            "error": {
                "message": "input must be a string or array of strings",
                "type": "invalid_request_error",
                "param": "input",
                "code": None,
            }
        }
    dims = body.get("dimensions") if isinstance(body.get("dimensions"), int) else DIMENSIONS
    data = []
    for i, text in enumerate(inputs):
        vec = vector_for(text, dims)
        emb: Any = vec
        if body.get("encoding_format") == "base64":
            emb = base64.b64encode(struct.pack(f"<{len(vec)}f", *vec)).decode()
        data.append({"object": "embedding", "index": i, "embedding": emb})
    tokens = sum(_tokens(t) for t in inputs)
    return 200, {
        "object": "list",
        "data": data,
        "model": body.get("model"),
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }


def _gemini_embeddings(kind: str, body: dict[str, Any]) -> tuple[int, Any]:
    def one(req: Any) -> dict[str, Any] | None:
        if not isinstance(req, dict):
            return None
        parts = (req.get("content") or {}).get("parts") if isinstance(req.get("content"), dict) else None
        if not isinstance(parts, list):
            return None
        text = "".join(p.get("text", "") for p in parts if isinstance(p, dict))
        dims = (
            req.get("outputDimensionality")
            if isinstance(req.get("outputDimensionality"), int)
            else DIMENSIONS
        )
        return {"values": vector_for(text, dims)}

    if kind == "embedContent":
        emb = one(body)
        if emb is None:
            return 400, {
                "error": {"code": 400, "message": "content.parts required", "status": "INVALID_ARGUMENT"}
            }
        return 200, {"embedding": emb}
    requests = body.get("requests")
    embs = [one(r) for r in requests] if isinstance(requests, list) else [None]
    if not embs or any(e is None for e in embs):
        return 400, {"error": {"code": 400, "message": "requests[] required", "status": "INVALID_ARGUMENT"}}
    return 200, {"embeddings": embs}


def _legacy_completion(body: dict[str, Any], raw: bytes) -> tuple[int, Any]:
    prompt = body.get("prompt")
    text = prompt[0] if isinstance(prompt, list) and prompt else prompt
    text = f"Echo: {text}" if isinstance(text, str) else "Echo"
    return 200, {
        "id": "cmpl-" + short_id("c", raw.decode("utf-8", "replace")),
        "object": "text_completion",
        "created": int(time.time()),
        "model": body.get("model"),
        "choices": [{"text": text, "index": 0, "logprobs": None, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": _tokens(text), "total_tokens": 1 + _tokens(text)},
    }


def _compact(body: dict[str, Any], raw: bytes) -> tuple[int, Any]:
    rid = short_id("cmp", raw.decode("utf-8", "replace"))
    items = body.get("input") if isinstance(body.get("input"), list) else []
    return 200, {
        "id": f"resp_{rid}",
        "object": "response.compaction",
        "created_at": int(time.time()),
        "output": [
            {
                "id": f"cmp_{rid}",
                "type": "compaction",
                "encrypted_content": base64.b64encode(f"compacted:{len(items)}".encode()).decode(),
            }
        ],
        "usage": {
            "input_tokens": _tokens(raw.decode("utf-8", "replace")),
            "output_tokens": 1,
            "total_tokens": _tokens(raw.decode("utf-8", "replace")) + 1,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        },
    }


def answer(path: str, body: Any, raw: bytes) -> tuple[int, Any] | None:
    """(status, JSON) for an extra endpoint, or None when ``path`` is not one."""
    gemini = _GEMINI_EMBED.match(path)
    if path not in ("/v1/embeddings", "/v1/completions", "/v1/responses/compact") and gemini is None:
        return None
    if not isinstance(body, dict):
        return 400, {
            "error": {"message": "request body must be a JSON object", "type": "invalid_request_error"}
        }
    if gemini is not None:
        return _gemini_embeddings(gemini.group(2), body)
    if path == "/v1/embeddings":
        return _openai_embeddings(body)
    if path == "/v1/completions":
        return _legacy_completion(body, raw)
    return _compact(body, raw)
