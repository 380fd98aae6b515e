"""A simulated provider prompt cache, so tests can measure cache hits through the gateway.

Opt-in per request with the ``x-mock-prompt-cache: <name>`` header (a channel's extra header) or
a ``/fault/prompt-cache=<name>`` base-URL prefix; without it every cache counter stays 0, as
before. Each name is a separate cache (two channels = two upstream accounts).

- OpenAI (Chat Completions, Responses) caches automatically by prefix: the prompt is serialised
  (tools, then instructions/messages/items in order) and the cached part is the longest common
  prefix with an earlier prompt of the same ``prompt_cache_key`` shard (no key: one default
  shard), in 128-character blocks and only from 256 characters on. Reported as cache reads only,
  as OpenAI does. A changing line near the top of the system prompt therefore defeats it.
- Anthropic (Messages) caches only at explicit breakpoints: every block carrying
  ``cache_control`` (tools, system blocks, message content blocks; the request-level
  ``cache_control`` marks the last block) stores the prefix up to and including it. A request
  reads the longest earlier-stored prefix that ends at one of its block boundaries up to its last
  breakpoint (Anthropic's look-back), and writes the rest up to its last breakpoint. No marker, no
  caching.
- Gemini: no cache reporting.

Tokens are characters / 4 (the mock's usual estimate), clamped to the request's input tokens.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict, deque
from typing import Any

import orjson

MIN_CHARS = 256
BLOCK_CHARS = 128
MAX_PROMPTS_PER_SHARD = 64
MAX_PREFIXES = 4096


def _j(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


def _strip_marker(block: Any) -> Any:
    if isinstance(block, dict) and "cache_control" in block:
        return {k: v for k, v in block.items() if k != "cache_control"}
    return block


class PromptCache:
    """State of one mock server's simulated caches (bounded)."""

    def __init__(self) -> None:
        self.openai: dict[str, deque[str]] = {}
        self.anthropic: OrderedDict[str, int] = OrderedDict()

    def reset(self) -> None:
        self.openai.clear()
        self.anthropic.clear()

    def account(self, protocol: str, body: dict[str, Any], input_tokens: int) -> tuple[int, int]:
        """(cache read tokens, cache write tokens) for this request, updating the cache."""
        if protocol in ("chat_completion", "responses"):
            read, write = self._openai(protocol, body), 0
        elif protocol == "messages":
            read, write = self._anthropic(body)
        else:
            return 0, 0
        read = min(read, input_tokens)
        return read, min(write, input_tokens - read)

    # -- OpenAI: automatic prefix caching --------------------------------------------------------

    def _openai(self, protocol: str, body: dict[str, Any]) -> int:
        parts = [_j(body.get("tools") or [])]
        if protocol == "chat_completion":
            parts += [_j(m) for m in body.get("messages") or []]
        else:
            parts.append(_j(body.get("instructions")))
            items = body.get("input")
            parts += [_j(i) for i in items] if isinstance(items, list) else [_j(items)]
        prompt = "".join(parts)
        key = body.get("prompt_cache_key")
        shard = self.openai.setdefault(
            key if isinstance(key, str) else "", deque(maxlen=MAX_PROMPTS_PER_SHARD)
        )
        best = 0
        for earlier in shard:
            n = 0
            limit = min(len(earlier), len(prompt))
            while n < limit and earlier[n] == prompt[n]:
                n += 1
            best = max(best, n)
        shard.append(prompt)
        if best < MIN_CHARS:
            return 0
        return (best // BLOCK_CHARS) * BLOCK_CHARS // 4

    # -- Anthropic: explicit breakpoints ---------------------------------------------------------

    def _anthropic(self, body: dict[str, Any]) -> tuple[int, int]:
        blocks: list[Any] = list(body.get("tools") or [])
        system = body.get("system")
        if isinstance(system, str):
            blocks.append({"type": "text", "text": system})
        elif isinstance(system, list):
            blocks += system
        for message in body.get("messages") or []:
            if not isinstance(message, dict):
                continue
            content = message.get("content")
            role = message.get("role")
            if isinstance(content, str):
                blocks.append({"role": role, "type": "text", "text": content})
            elif isinstance(content, list):
                blocks += [{"role": role, **b} if isinstance(b, dict) else b for b in content]
        marks = [i for i, b in enumerate(blocks) if isinstance(b, dict) and "cache_control" in b]
        if "cache_control" in body and blocks:
            marks.append(len(blocks) - 1)
        if not marks:
            return 0, 0
        last = max(marks)
        digests: list[str] = []
        lengths: list[int] = []
        h = hashlib.sha256()
        total = 0
        for block in blocks[: last + 1]:
            text = _j(_strip_marker(block))
            h.update(text.encode())
            total += len(text)
            digests.append(h.copy().hexdigest())
            lengths.append(total)
        read_chars = 0
        for i in range(last, -1, -1):  # the longest stored prefix ending at a block boundary
            if digests[i] in self.anthropic:
                read_chars = lengths[i]
                self.anthropic.move_to_end(digests[i])
                break
        for i in marks:
            self.anthropic[digests[i]] = lengths[i]
            self.anthropic.move_to_end(digests[i])
        while len(self.anthropic) > MAX_PREFIXES:
            self.anthropic.popitem(last=False)
        return read_chars // 4, (lengths[last] - read_chars) // 4
