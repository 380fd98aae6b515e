"""Rule validation shared by admin, REST API and config import: an invalid rule never reaches
the hot path."""

from __future__ import annotations

from typing import Any


def validate_rule(
    *, transform: str, scope: str, phase: str, models: Any, config: Any
) -> dict[str, list[str]]:
    """Field name -> messages. Empty when the rule is valid."""
    errors: dict[str, list[str]] = {}
    if models is not None:
        if not isinstance(models, list) or not all(isinstance(m, str) and m for m in models):
            errors.setdefault("models", []).append(
                "Must be a list of non-empty glob strings, or empty for all models."
            )
    if config is not None and not isinstance(config, dict):
        errors.setdefault("config", []).append("Config must be a JSON object.")
    from transforms.registry import registry

    entry = registry.get(transform)
    if entry is None:
        errors.setdefault("transform", []).append(
            f"Unknown transform: {transform!r} (not built in and not installed as a plug-in)."
        )
        return errors
    if phase not in entry.phases:
        errors.setdefault("phase", []).append(f"{transform} does not support the {phase} phase.")
    if scope not in entry.scopes:
        errors.setdefault("transform", []).append(f"{transform} is not allowed in the {scope} scope.")
    if isinstance(config, dict):
        for path, message in entry.validate_config(config):
            errors.setdefault("config", []).append(f"{path}: {message}" if path else message)
    return errors
