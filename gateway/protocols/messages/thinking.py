"""Anthropic extended-thinking controls: deriving a reasoning effort from a client's
``thinking``/``output_config``, generating them for requests that came from another protocol
with only an effort, and the outbound validation Anthropic documents (reference §3.3)."""

from __future__ import annotations

import re
from typing import Any

from gateway.errors import ProtocolError

MANUAL_BUDGETS = {"minimal": 1024, "low": 1024, "medium": 4096, "high": 16384, "xhigh": 32000, "max": 32000}
ADAPTIVE_EFFORTS = {
    "minimal": "low",
    "low": "low",
    "medium": "medium",
    "high": "high",
    "xhigh": "max",
    "max": "max",
}
MIN_BUDGET = 1024

_FAMILY_FIRST = re.compile(r"claude-(opus|sonnet|haiku)-(\d+)(?:[-.](\d{1,2}))?(?:\D|$)")
_VERSION_FIRST = re.compile(r"claude-(\d+)(?:[-.](\d{1,2}))?-(opus|sonnet|haiku)")


def derive_effort(thinking: Any, output_config: Any) -> str | None:
    """Effort from native controls: ``output_config.effort`` wins; then disabled -> none; then a
    manual budget -> low (<=1024) / medium (<=4096) / high (<=16384) / xhigh; adaptive without an
    effort -> high (Anthropic's documented default)."""
    if isinstance(output_config, dict):
        effort = output_config.get("effort")
        if isinstance(effort, str) and effort:
            return {"minimum": "minimal"}.get(effort, effort)
    if not isinstance(thinking, dict):
        return None
    kind = thinking.get("type")
    if kind == "disabled":
        return "none"
    if kind == "adaptive":
        return "high"
    if kind == "enabled":
        budget = thinking.get("budget_tokens")
        if not isinstance(budget, int) or isinstance(budget, bool):
            return "medium"
        if budget <= 1024:
            return "low"
        if budget <= 4096:
            return "medium"
        if budget <= 16384:
            return "high"
        return "xhigh"
    return None


def is_adaptive_model(model: str) -> bool:
    """Claude 4.6 and newer (and Claude ids we cannot parse, i.e. future ones) think adaptively;
    older Claude ids and every non-Claude model take a manual budget."""
    name = model.lower().rsplit("/", 1)[-1]
    if "claude" not in name:
        return False
    m = _FAMILY_FIRST.search(name)
    if m:
        major, minor = int(m.group(2)), int(m.group(3) or 0)
    else:
        m = _VERSION_FIRST.search(name)
        if not m:
            return True
        major, minor = int(m.group(1)), int(m.group(2) or 0)
    return (major, minor) >= (4, 6)


def generate(
    effort: str | None, model: str, max_tokens: int
) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """(thinking, output_config) for an effort that came from another protocol.

    Effort ``none`` disables thinking entirely (the reference falls through to a 4096 budget for
    non-adaptive models, which is the opposite of what the client asked). A generated manual
    budget is clamped below ``max_tokens``; when that leaves less than Anthropic's 1024 minimum
    no thinking is sent rather than failing the client's request over a control it never wrote."""
    if effort is None or effort == "none":
        return None, None
    if is_adaptive_model(model):
        level = ADAPTIVE_EFFORTS.get(effort, "high")
        if level == "max" and "opus" not in model.lower():
            level = "high"
        return {"type": "adaptive"}, {"effort": level}
    budget = min(MANUAL_BUDGETS.get(effort, 4096), max_tokens - 1)
    if budget < MIN_BUDGET:
        return None, None
    return {"type": "enabled", "budget_tokens": budget}, None


def _bad(message: str, param: str) -> ProtocolError:
    return ProtocolError(message, param=param, code="invalid_request")


def validate(body: dict[str, Any]) -> None:
    """Anthropic's documented extended-thinking rules, checked before dispatch so the client gets
    a clear 400 instead of a failed upstream attempt. Never fixes the request up."""
    thinking = body.get("thinking")
    if not isinstance(thinking, dict):
        return
    kind = thinking.get("type")
    if kind == "enabled":
        budget = thinking.get("budget_tokens")
        if not isinstance(budget, int) or isinstance(budget, bool):
            raise _bad(
                "thinking.budget_tokens is required when thinking is enabled", "thinking.budget_tokens"
            )
        if budget < MIN_BUDGET:
            raise _bad(f"thinking.budget_tokens must be >= {MIN_BUDGET}", "thinking.budget_tokens")
        max_tokens = body.get("max_tokens")
        if isinstance(max_tokens, int) and budget >= max_tokens:
            raise _bad("thinking.budget_tokens must be less than max_tokens", "thinking.budget_tokens")
    elif kind == "adaptive":
        if "budget_tokens" in thinking:
            raise _bad("adaptive thinking does not take budget_tokens", "thinking.budget_tokens")
    else:
        return
    temperature = body.get("temperature")
    if temperature is not None and temperature != 1:
        raise _bad("temperature may only be set to 1 when thinking is enabled", "temperature")
    if body.get("top_k") is not None:
        raise _bad("top_k cannot be set when thinking is enabled", "top_k")
    top_p = body.get("top_p")
    if top_p is not None and not (isinstance(top_p, int | float) and 0.95 <= top_p <= 1):
        raise _bad("top_p must be between 0.95 and 1 when thinking is enabled", "top_p")
    choice = body.get("tool_choice")
    if isinstance(choice, dict) and choice.get("type") in ("any", "tool"):
        raise _bad("forced tool use (tool_choice any/tool) is not compatible with thinking", "tool_choice")
