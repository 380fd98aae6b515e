"""reasoning_effort_to_budget: map the request's reasoning effort to a thinking-token budget,
for upstreams that take ``thinking.budget_tokens`` (Anthropic-compatible and many OpenAI-
compatible thinking models) instead of an effort.

Reads the typed effort: ``low``, ``medium`` (config key ``med``) and ``high`` map to their
budgets; ``xhigh`` falls back to ``high``; ``max`` to ``xhigh``, then ``high``. Any other effort
(``none``, ``minimal``) or no effort: nothing. Writes ``thinking.budget_tokens`` at the top level
of the upstream body (``thinking`` becomes an object first when it is not one; its other keys,
such as ``type``, stay). Neither sets ``thinking.type`` nor removes the effort.

Where the body's ``thinking`` lives depends on the codecs: a Chat client's DeepSeek-style
``thinking`` and a Messages client's own ``thinking`` are updated where the decoder keeps them;
toward a Messages upstream, which otherwise derives ``thinking`` from the effort, the rule supplies
``{"type": "enabled", "budget_tokens": n}`` (or the client's object with the budget) so that is
what Anthropic receives (Anthropic's own checks then apply: a budget >= ``max_tokens`` is a 400).

Never in API-key chains: the thinking budget drives cost (reference scope: provider only; the
global chain is operator-owned too).
"""

from __future__ import annotations

from typing import Any

from gateway.protocols.chat.common import THINKING_CONFIG
from gateway.protocols.messages.common import DERIVED_EFFORT, RAW_THINKING
from gateway.urp import Request
from transforms.base import NOT_FOR_KEYS, Transform, TransformContext, TransformExample

_BUDGET = {"type": "integer", "minimum": 0, "maximum": 4294967295}


class ReasoningEffortToBudget(Transform):
    type_id = "reasoning_effort_to_budget"
    category = "reasoning"
    name = {"en": "Reasoning: effort to thinking budget", "zh": "推理：effort 转思考预算"}
    description = {
        "en": "Sets thinking.budget_tokens from the request's reasoning effort (low / medium / high, "
        "optionally xhigh and max).",
        "zh": "根据请求的推理 effort（low / medium / high，可选 xhigh 和 max）设置 thinking.budget_tokens。",
    }
    phases = ("request",)
    scopes = NOT_FOR_KEYS
    config_schema = {
        "type": "object",
        "properties": {
            "low": {**_BUDGET, "title": "Budget for low"},
            "med": {**_BUDGET, "title": "Budget for medium"},
            "high": {**_BUDGET, "title": "Budget for high"},
            "xhigh": {**_BUDGET, "title": "Budget for xhigh (default: high)"},
            "max": {**_BUDGET, "title": "Budget for max (default: xhigh, then high)"},
        },
        "required": ["low", "med", "high"],
    }
    examples = (
        TransformExample(
            title="Effort medium becomes a 4096-token budget",
            phase="request",
            protocol="chat_completion",
            config={"low": 1024, "med": 4096, "high": 16384},
            input={
                "model": "qwen3",
                "reasoning_effort": "medium",
                "thinking": {"type": "enabled"},
                "messages": [{"role": "user", "content": "hi"}],
            },
            expected={"thinking": {"type": "enabled", "budget_tokens": 4096}},
        ),
    )

    def setup(self) -> None:
        c = self.config
        xhigh = c.get("xhigh", c["high"])
        self.budgets: dict[str, int] = {
            "low": c["low"],
            "medium": c["med"],
            "high": c["high"],
            "xhigh": xhigh,
            "max": c.get("max", xhigh),
        }

    def apply_request(self, req: Request, ctx: TransformContext) -> None:
        rc = req.reasoning
        if rc is None or not rc.effort or rc.effort not in self.budgets:
            return
        budget = self.budgets[rc.effort]
        # Where the upstream body's ``thinking`` comes from depends on the codecs: a Chat client's
        # DeepSeek-style object and a Messages client's own object ride on the reasoning config;
        # a Messages upstream otherwise derives it from the effort; else it is a plain top-level field.
        if isinstance(rc.extra.get(THINKING_CONFIG), dict):
            rc.extra[THINKING_CONFIG] = with_budget(rc.extra[THINKING_CONFIG], budget)
        elif ctx.upstream_protocol == "messages" or isinstance(rc.extra.get(RAW_THINKING), dict):
            raw = rc.extra.get(RAW_THINKING)
            thinking = dict(raw) if isinstance(raw, dict) else {"type": "enabled"}
            rc.extra[RAW_THINKING] = with_budget(thinking, budget)
            rc.extra[DERIVED_EFFORT] = rc.effort  # the Messages encoder then sends this object verbatim
        else:
            req.extra["thinking"] = with_budget(req.extra.get("thinking"), budget)


def with_budget(thinking: Any, budget: int) -> dict[str, Any]:
    """``thinking`` as an object (replaced by ``{}`` when it is not one) with the budget set."""
    out = dict(thinking) if isinstance(thinking, dict) else {}
    out["budget_tokens"] = budget
    return out
