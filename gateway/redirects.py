"""Model redirect rules: one validated shape for per-key redirects (``ApiKey.model_redirects``)
and the global ones (``GlobalSettings.model_redirects``), control-plane.md §1.7/§1.8/§6.2.

A rule is ``{"pattern": regex, "replace": model}``; at most 32 rules; the pattern is non-empty,
at most 256 bytes (UTF-8) and is matched against the whole model name; ``replace`` is
non-empty. The first matching rule rewrites the model, key rules before global rules, once.
Rules are compiled when the configuration snapshot is built, never per request.
"""

from __future__ import annotations

import re
from typing import Any

from django.core.exceptions import ValidationError

MAX_RULES = 32
MAX_PATTERN_BYTES = 256


def redirect_problems(value: Any) -> list[str]:
    """What is wrong with a rule list, in the reference's wording; [] when it is valid."""
    if value in (None, ""):
        return []
    if not isinstance(value, list):
        return ["model redirects must be a list of {pattern, replace} rules"]
    if len(value) > MAX_RULES:
        return [f"too many model redirect rules (max {MAX_RULES})"]
    problems = []
    for i, rule in enumerate(value):
        if not isinstance(rule, dict) or set(rule) - {"pattern", "replace"}:
            problems.append(f"model redirect rule {i} must be an object with only 'pattern' and 'replace'")
            continue
        pattern, replace = rule.get("pattern"), rule.get("replace")
        if not isinstance(pattern, str) or not pattern:
            problems.append(f"model redirect rule {i}: pattern must not be empty")
        elif len(pattern.encode()) > MAX_PATTERN_BYTES:
            problems.append(f"model redirect rule {i}: pattern exceeds {MAX_PATTERN_BYTES} bytes")
        else:
            try:
                re.compile(f"^(?:{pattern})$")
            except re.error as exc:
                problems.append(f"invalid model redirect pattern: rule {i}: {exc}")
        if not isinstance(replace, str) or not replace:
            problems.append(f"model redirect rule {i}: replace must not be empty")
    return problems


def validate_redirects(value: Any) -> None:
    """Django field validator (admin, REST API and the config file all run it)."""
    problems = redirect_problems(value)
    if problems:
        raise ValidationError(problems)


def compile_redirects(raw: Any) -> tuple[tuple[re.Pattern[str], str], ...]:
    """Valid rules compiled for ``fullmatch``; invalid ones (rows saved before validation) are
    skipped, never an error at request time."""
    out = []
    for rule in raw or ():
        if isinstance(rule, dict) and not redirect_problems([rule]):
            out.append((re.compile(f"(?:{rule['pattern']})"), str(rule["replace"])))
    return tuple(out)
