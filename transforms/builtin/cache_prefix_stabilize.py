"""cache_prefix_stabilize: keep the system prompt byte-identical across requests by moving (or
removing) the lines that change every time (working directory, date, billing header), so the
upstream's prefix cache can hit."""

from __future__ import annotations

from gateway.urp import Request, TextNode
from transforms.base import Transform, TransformContext, TransformExample
from transforms.lib.cache_keys import VOLATILE_TAIL, stable_prefix_length

DEFAULT_BLOCKS = [
    {"open": "<env>", "close": "</env>"},
    {"open": "<environment_context>", "close": "</environment_context>"},
    {"open": "<user_info>", "close": "</user_info>"},
    {"open": "<timestamp>", "close": "</timestamp>"},
]
DEFAULT_LINE_PREFIXES = ["x-anthropic-billing-header:"]
_NON_BLANK = {"type": "string", "minLength": 1, "pattern": r"\S"}


def volatile_lines(lines: list[str], blocks: list[tuple[str, str]], prefixes: list[str]) -> list[bool]:
    """Which lines are volatile. A block counts only when its closing line exists: an unclosed
    opening line is ordinary text, so a malformed marker never swallows the rest of the prompt."""
    flags = [False] * len(lines)
    i = 0
    while i < len(lines):
        trimmed = lines[i].strip()
        if any(trimmed.startswith(p) for p in prefixes):
            flags[i] = True
            i += 1
            continue
        block = next(((o, c) for o, c in blocks if trimmed.startswith(o)), None)
        if block is not None:
            close = block[1]
            end = next((j for j in range(i, len(lines)) if lines[j].strip().endswith(close)), None)
            if end is not None:
                for j in range(i, end + 1):
                    flags[j] = True
                i = end + 1
                continue
        i += 1
    return flags


class CachePrefixStabilize(Transform):
    """Only for Chat Completions and Responses upstreams (Anthropic caches at whole-block
    breakpoints, so reordering text would not help there). Looks only at text nodes of the leading
    system/developer run; nodes after it are never read or written. ``relocate`` appends every
    volatile line, in order, to the last prefix text node (nothing added, dropped or edited);
    ``strip`` drops them. A node that lost lines is re-joined and trimmed of surrounding line
    breaks; when the rule acted, prefix text nodes left empty are removed. Idempotent."""

    type_id = "cache_prefix_stabilize"
    category = "cache"
    name = {"en": "Auto-cache: stabilize the prompt prefix", "zh": "自动缓存：稳定提示词前缀"}
    description = {
        "en": "Moves per-request lines (environment blocks, timestamps, billing headers) to the end of the "
        "system prompt, or strips them, so the prompt prefix stays identical and OpenAI-style prefix "
        "caching keeps hitting.",
        "zh": "将每次请求都会变化的行（环境信息块、时间戳、计费头）移到系统提示词末尾或直接移除，使提示词前缀保持不变，"
        "从而持续命中 OpenAI 式前缀缓存。",
    }
    phases = ("request",)
    scopes = ("provider", "global", "api_key")
    config_schema = {
        "type": "object",
        "properties": {
            "action": {
                "type": "string",
                "enum": ["relocate", "strip"],
                "default": "relocate",
                "description": "relocate: move volatile lines to the end of the prefix; strip: remove them.",
            },
            "blocks": {
                "type": "array",
                "default": DEFAULT_BLOCKS,
                "description": "Volatile blocks (opening and closing line); replaces the built-in set; [] disables.",
                "items": {
                    "type": "object",
                    "required": ["open", "close"],
                    "additionalProperties": False,
                    "properties": {"open": _NON_BLANK, "close": _NON_BLANK},
                },
            },
            "line_prefixes": {
                "type": "array",
                "default": DEFAULT_LINE_PREFIXES,
                "items": _NON_BLANK,
                "description": "Volatile single lines by prefix; replaces the built-in set; [] disables.",
            },
        },
        "additionalProperties": False,
    }
    examples = (
        TransformExample(
            title="The <env> block moves to the end of the system prompt",
            phase="request",
            protocol="chat_completion",
            input={
                "model": "gpt-4o",
                "messages": [
                    {
                        "role": "system",
                        "content": "You are a coding agent.\n<env>\nWorking directory: /srv/app\n"
                        "Today's date: 2026-09-10\n</env>\n## Rules\nPrefer the existing convention.",
                    },
                    {"role": "user", "content": "hi"},
                ],
            },
            expected={
                "messages": [
                    {
                        "role": "system",
                        "content": "You are a coding agent.\n## Rules\nPrefer the existing convention.\n"
                        "<env>\nWorking directory: /srv/app\nToday's date: 2026-09-10\n</env>",
                    },
                    {"role": "user", "content": "hi"},
                ]
            },
        ),
        TransformExample(
            title="strip removes the block; the emptied node goes",
            phase="request",
            protocol="chat_completion",
            config={"action": "strip"},
            input={
                "model": "gpt-4o",
                "messages": [
                    {"role": "system", "content": "<user_info>\nWorkspace Path: /w\n</user_info>"},
                    {"role": "system", "content": "Stable instructions."},
                    {"role": "user", "content": "hi"},
                ],
            },
            expected={
                "messages": [
                    {"role": "system", "content": "Stable instructions."},
                    {"role": "user", "content": "hi"},
                ]
            },
        ),
    )

    def setup(self) -> None:
        self._blocks = [(b["open"].strip(), b["close"].strip()) for b in self.config["blocks"]]
        self._prefixes = [p.strip() for p in self.config["line_prefixes"]]

    def apply_request(self, req: Request, ctx: TransformContext) -> None:
        if ctx.upstream_protocol not in ("chat_completion", "responses") or not (
            self._blocks or self._prefixes
        ):
            return
        end = stable_prefix_length(req.input)
        texts = [n for n in req.input[:end] if type(n) is TextNode]
        if not texts:
            return
        moved: list[str] = []
        changed: list[tuple[TextNode, str]] = []
        for node in texts:
            lines = node.content.split("\n")
            flags = volatile_lines(lines, self._blocks, self._prefixes)
            if any(flags):
                moved.extend(line for line, f in zip(lines, flags, strict=True) if f)
                kept = "\n".join(line for line, f in zip(lines, flags, strict=True) if not f)
                changed.append((node, kept.strip("\n")))
        if not moved:
            return
        for node, content in changed:
            node.content = content
        if self.config["action"] == "relocate":
            last = texts[-1]
            joined = "\n".join(moved)
            last.content = joined if not last.content else f"{last.content}\n{joined}"
            ctx.shared[VOLATILE_TAIL] = (last, joined)
        prefix = req.input[:end]
        req.input[:end] = [n for n in prefix if not (type(n) is TextNode and n.content == "")]
