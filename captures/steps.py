"""The executed chain's chips for the capture viewer: one ordinal per chip, whether the rule
changed anything, its own before/after diff (from the per-rule states the capture recorder
keeps, ``AttemptRecord.rule_steps``) and the rule's admin page."""

from __future__ import annotations

from typing import Any

from captures import diff as jdiff


def _phase_steps(run: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Each traced rule with the state before and after it."""
    if not run:
        return []
    prev = run.get("before")
    out = []
    for step in run.get("steps") or []:
        after = step.get("after") if step.get("changed") else prev
        out.append({**step, "before_state": prev, "after_state": after})
        prev = after
    return out


def chips(
    chain: list[dict[str, Any]] | None,
    rule_steps: dict[str, Any] | None,
    admin_urls: dict[int, str] | None = None,
) -> list[dict[str, Any]] | None:
    """The chain entries with ``ordinal``, ``changed`` (True/False, None when not recorded:
    stream response rules, captures from before per-rule states) and ``diff`` (a
    ``SideBySide``) for the rules that changed something."""
    if chain is None:
        return None
    steps = rule_steps or {}
    queues = {phase: _phase_steps(steps.get(phase)) for phase in ("request", "response")}
    out = []
    for n, entry in enumerate(chain, start=1):
        rid = entry.get("rule_id")
        chip = {
            **entry,
            "ordinal": n,
            "changed": None,
            "diff": None,
            "admin_url": (admin_urls or {}).get(rid) if isinstance(rid, int) else None,
        }
        queue = queues.get(entry.get("phase") or "")
        if queue:
            step = queue[0]
            if step.get("transform") == entry.get("transform") and step.get("rule_id") == entry.get(
                "rule_id"
            ):
                queue.pop(0)
                chip["changed"] = bool(step.get("changed"))
                if chip["changed"]:
                    chip["diff"] = jdiff.side_by_side(
                        f"#{n} {entry.get('transform')}",
                        "URP before this rule",
                        step["before_state"],
                        "URP after this rule",
                        step["after_state"],
                    )
        out.append(chip)
    return out


def admin_urls(chain: list[dict[str, Any]] | None) -> dict[int, str]:
    """Rule id -> where it is edited in the admin (rules that still exist)."""
    from gateway.playground import rule_admin_url
    from transforms.models import TransformRule

    ids = {e.get("rule_id") for e in chain or () if e.get("rule_id")}
    if not ids:
        return {}
    out = {}
    for rid, scope, provider_id, key_id in TransformRule.objects.filter(pk__in=ids).values_list(
        "pk", "scope", "provider_id", "api_key_id"
    ):
        url = rule_admin_url(scope, rid, provider_id or key_id)
        if url:
            out[rid] = url
    return out
