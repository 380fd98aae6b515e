"""cache_openai_tool_use: OpenAI explicit prompt-cache breakpoints on the newest tool results of
an agent loop, for the models that support explicit breakpoints (gpt-5.6 and later)."""

from __future__ import annotations

import re

from gateway.urp import FileNode, ImageNode, Node, Request, TextNode, ToolCallNode, ToolResultNode
from transforms.base import Transform, TransformContext, TransformExample

BREAKPOINT = "prompt_cache_breakpoint"
FILE_ID_ORIGIN = "_gw_file_id_origin"
_SEGMENT = re.compile(r"gpt-(\d+)(?:\.(\d+))?(?:-.*)?", re.DOTALL)


def explicit_breakpoint_model(model: str) -> bool:
    """gpt-5.6 and later (any ``/`` or ``:`` separated segment): ``gpt-5.6``, ``gpt-5.6-sol``,
    ``openai/gpt-5.10-pro``, ``ft:gpt-6:org:x`` qualify; ``gpt-5.5``, ``gpt-5``, ``o4-mini`` do not."""
    for segment in re.split(r"[/:]", model):
        m = _SEGMENT.fullmatch(segment)
        if m:
            major, minor = int(m.group(1)), int(m.group(2) or 0)
            if major > 5 or (major == 5 and minor >= 6):
                return True
    return False


def _eligible(entry: Node) -> bool:
    if isinstance(entry, TextNode):
        return True
    if isinstance(entry, ImageNode | FileNode):
        kind = entry.source.kind
        if kind in ("url", "base64"):
            return True
        return kind == "file_id" and entry.extra.get(FILE_ID_ORIGIN) == "openai"
    return False


def _runs(nodes: list[Node]) -> list[tuple[int, int]]:
    """Maximal runs [start, end) of tool results immediately preceded by a tool call, oldest first."""
    runs = []
    i = 0
    while i < len(nodes):
        if isinstance(nodes[i], ToolResultNode) and i > 0 and isinstance(nodes[i - 1], ToolCallNode):
            j = i
            while j < len(nodes) and isinstance(nodes[j], ToolResultNode):
                j += 1
            runs.append((i, j))
            i = j
        else:
            i += 1
    return runs


class CacheOpenaiToolUse(Transform):
    """Preconditions (else a no-op): Responses upstream, an explicit-breakpoint model, the last
    node is a tool result and the trailing result run follows a tool call. Budget: 4 when the
    client set ``prompt_cache_options.mode == "explicit"``, else 3, minus the breakpoints already
    present (on nodes or tool-result entries). Walking result runs newest first, each run's
    candidate is its newest eligible content entry (text; image or file by URL or base64; an
    OpenAI file id); ``prompt_cache_breakpoint: {"mode": "explicit"}`` goes on the entry, never on
    the outer result, and ``prompt_cache_options`` is never written. Idempotent."""

    type_id = "cache_openai_tool_use"
    category = "cache"
    name = {"en": "Auto-cache: OpenAI tool results", "zh": "自动缓存：OpenAI 工具结果"}
    description = {
        "en": "For OpenAI Responses models with explicit prompt-cache breakpoints (gpt-5.6 and later), "
        "marks the newest tool results of an agent loop as cache breakpoints, within OpenAI's limit.",
        "zh": "对支持显式提示词缓存断点的 OpenAI Responses 模型（gpt-5.6 及以后），在限额内将智能体循环中最新的"
        "工具结果标记为缓存断点。",
    }
    phases = ("request",)
    scopes = ("provider", "global", "api_key")
    aliases = ("auto_cache_openai_tool_use",)
    examples = (
        TransformExample(
            title="The newest result of the trailing run gets the breakpoint",
            phase="request",
            protocol="responses",
            input={
                "model": "gpt-5.6-sol",
                "input": [
                    {"type": "message", "role": "user", "content": "check both"},
                    {"type": "function_call", "call_id": "a", "name": "f", "arguments": "{}"},
                    {"type": "function_call", "call_id": "b", "name": "f", "arguments": "{}"},
                    {"type": "function_call_output", "call_id": "a", "output": "result a"},
                    {"type": "function_call_output", "call_id": "b", "output": "result b"},
                ],
            },
            expected={
                "input": [
                    {"type": "message", "role": "user", "content": "check both"},
                    {"type": "function_call", "call_id": "a", "name": "f", "arguments": "{}"},
                    {"type": "function_call", "call_id": "b", "name": "f", "arguments": "{}"},
                    {"type": "function_call_output", "call_id": "a", "output": "result a"},
                    {
                        "type": "function_call_output",
                        "call_id": "b",
                        "output": [
                            {
                                "type": "input_text",
                                "text": "result b",
                                "prompt_cache_breakpoint": {"mode": "explicit"},
                            }
                        ],
                    },
                ]
            },
        ),
        TransformExample(
            title="A model without explicit breakpoints: unchanged",
            phase="request",
            protocol="responses",
            input={
                "model": "gpt-5.5",
                "input": [
                    {"type": "message", "role": "user", "content": "go"},
                    {"type": "function_call", "call_id": "a", "name": "f", "arguments": "{}"},
                    {"type": "function_call_output", "call_id": "a", "output": "result a"},
                ],
            },
            expected={
                "input": [
                    {"type": "message", "role": "user", "content": "go"},
                    {"type": "function_call", "call_id": "a", "name": "f", "arguments": "{}"},
                    {"type": "function_call_output", "call_id": "a", "output": "result a"},
                ]
            },
        ),
    )

    def apply_request(self, req: Request, ctx: TransformContext) -> None:
        nodes = req.input
        if ctx.upstream_protocol != "responses" or not nodes or not isinstance(nodes[-1], ToolResultNode):
            return
        if not explicit_breakpoint_model(req.model):
            return
        runs = _runs(nodes)
        if not runs or runs[-1][1] != len(nodes):
            return  # the trailing results do not answer a tool call
        options = req.extra.get("prompt_cache_options")
        limit = 4 if isinstance(options, dict) and options.get("mode") == "explicit" else 3
        existing = sum(1 for n in nodes if BREAKPOINT in n.extra)
        existing += sum(
            1 for n in nodes if isinstance(n, ToolResultNode) for e in n.content if BREAKPOINT in e.extra
        )
        remaining = limit - existing
        for start, end in reversed(runs):
            if remaining <= 0:
                return
            results = [n for n in reversed(nodes[start:end]) if isinstance(n, ToolResultNode)]
            candidate = next(
                (entry for node in results for entry in reversed(node.content) if _eligible(entry)), None
            )
            if candidate is None or BREAKPOINT in candidate.extra:
                continue
            candidate.extra[BREAKPOINT] = {"mode": "explicit"}
            remaining -= 1
