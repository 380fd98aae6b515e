"""Lifecycle checker for Chat Completions SSE produced by our downstream encoder.

``check_chat_stream(raw)`` asserts the wire grammar of reference §4.7 and returns the parsed
chunks; ``assemble(chunks)`` folds them into text, reasoning, tool calls, finish reason, usage.
"""

from __future__ import annotations

from typing import Any

import orjson


def _frames(raw: bytes) -> list[str]:
    text = raw.decode("utf-8")
    assert text.endswith("\n\n"), "stream must end with a complete frame"
    out: list[str] = []
    for block in text.split("\n\n")[:-1]:
        lines = block.split("\n")
        if all(line.startswith(":") for line in lines):
            continue  # keep-alive comment
        assert all(line.startswith("data: ") for line in lines), f"Chat frames are data-only: {block!r}"
        assert len(lines) == 1, f"one data line per frame: {block!r}"
        out.append(lines[0][6:])
    return out


def check_chat_stream(raw: bytes, *, include_usage: bool | None = None) -> list[dict[str, Any]]:
    frames = _frames(raw)
    assert frames, "empty stream"
    assert frames[-1] == "[DONE]", "stream must end with data: [DONE]"
    assert frames.count("[DONE]") == 1, "exactly one [DONE]"
    chunks = [orjson.loads(f) for f in frames[:-1]]
    if chunks and "error" in chunks[-1]:
        err = chunks[-1]["error"]
        assert isinstance(err.get("message"), str) and "type" in err and "code" in err, err
        assert all("error" not in c for c in chunks[:-1]), "only one error chunk, and it is terminal"
        body = chunks[:-1]
        if body:
            _check_body(body, include_usage=None, terminal=False)
        return chunks
    _check_body(chunks, include_usage=include_usage, terminal=True)
    return chunks


def _check_body(chunks: list[dict[str, Any]], *, include_usage: bool | None, terminal: bool) -> None:
    first = chunks[0]
    ident = (first.get("id"), first.get("created"), first.get("model"))
    assert isinstance(ident[0], str) and ident[0], "chunk id"
    assert first["choices"][0]["delta"].get("role") == "assistant", "role chunk comes first"
    finish_at = None
    usage_at = None
    seen_calls: dict[int, str] = {}
    for i, c in enumerate(chunks):
        assert c.get("object") == "chat.completion.chunk", c
        assert (c.get("id"), c.get("created"), c.get("model")) == ident, (
            "id/created/model shared by all chunks"
        )
        choices = c["choices"]
        if not choices:
            assert "usage" in c, f"a choice-less chunk is the usage chunk: {c}"
            assert usage_at is None, "one usage chunk"
            usage_at = i
            continue
        assert usage_at is None, "nothing after the usage chunk"
        assert len(choices) == 1 and choices[0]["index"] == 0
        choice = choices[0]
        delta = choice["delta"]
        assert not ("content" in delta and delta.get("content") and "tool_calls" in delta), (
            "content and tool_calls never share a chunk"
        )
        if choice.get("finish_reason") is not None:
            assert finish_at is None, "exactly one finish chunk"
            assert delta == {}, f"finish chunk has an empty delta: {delta}"
            assert "usage" not in c or c["usage"] is None, "finish chunk carries no usage"
            finish_at = i
            continue
        assert finish_at is None, f"delta after the finish chunk: {c}"
        for tc in delta.get("tool_calls") or []:
            idx = tc["index"]
            if idx not in seen_calls:
                assert idx == len(seen_calls), f"tool-call indices contiguous from 0, got {idx}"
                assert tc.get("id") and tc.get("type") in ("function", "custom"), f"first fragment: {tc}"
                assert tc[tc["type"]].get("name"), f"first fragment names the tool: {tc}"
                seen_calls[idx] = tc["id"]
            else:
                assert "id" not in tc or tc["id"] == seen_calls[idx], "a fragment keeps its call id"
    if terminal:
        assert finish_at is not None, "a finish chunk"
        if seen_calls:
            assert chunks[finish_at]["choices"][0]["finish_reason"] == "tool_calls"
        if include_usage is True:
            assert usage_at == len(chunks) - 1, "usage chunk right before [DONE]"
        elif include_usage is False:
            assert usage_at is None, "no usage chunk unless asked"


def assemble(chunks: list[dict[str, Any]]) -> dict[str, Any]:
    """Fold chunks the way an SDK does."""
    text, reasoning, refusal = "", "", ""
    calls: dict[int, dict[str, Any]] = {}
    finish = None
    usage = None
    details: list[dict[str, Any]] = []
    for c in chunks:
        if c.get("usage"):
            usage = c["usage"]
        for choice in c.get("choices") or []:
            d = choice["delta"]
            text += d.get("content") or ""
            refusal += d.get("refusal") or ""
            reasoning += d.get("reasoning") or d.get("reasoning_content") or ""
            details.extend(d.get("reasoning_details") or [])
            for tc in d.get("tool_calls") or []:
                slot = calls.setdefault(tc["index"], {"id": None, "type": None, "name": "", "arguments": ""})
                if tc.get("id"):
                    slot["id"] = tc["id"]
                    slot["type"] = tc.get("type")
                inner = tc.get("function") or tc.get("custom") or {}
                slot["name"] += inner.get("name") or ""
                slot["arguments"] += inner.get("arguments") or inner.get("input") or ""
            if choice.get("finish_reason"):
                finish = choice["finish_reason"]
    return {
        "text": text,
        "reasoning": reasoning,
        "refusal": refusal,
        "details": details,
        "tool_calls": [calls[i] for i in sorted(calls)],
        "finish_reason": finish,
        "usage": usage,
    }
