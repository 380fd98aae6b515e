"""Writing transform rules: the one path the REST serializer and ``loadconfig`` share.

A rule is validated by ``transforms.validation.validate_rule`` through the model's
``full_clean()``; the transform id is stored canonical (legacy aliases accepted).
"""

from __future__ import annotations

from typing import Any

from gateway.writes import ErrorTree, assign, editable_fields, save_checked
from keys.models import ApiKey
from providers.models import Provider
from transforms.models import Scope, TransformRule
from transforms.registry import registry

# What a chain entry may say (the owner and position come from where the entry sits).
RULE_FIELDS = editable_fields(TransformRule, exclude=("scope", "provider", "api_key", "position"))
OWNER_BY_SCOPE: dict[str, str | None] = {
    Scope.PROVIDER: "provider",
    Scope.API_KEY: "api_key",
    Scope.GLOBAL: None,
}


def canonical_transform(value: str) -> str:
    return registry.canonical_id(value.strip())


def owner_errors(
    scope: str | None, provider: Provider | None, api_key: ApiKey | None
) -> dict[str, list[str]]:
    """The owner must match the scope: a provider for provider rules, a key for key rules."""
    errors: dict[str, list[str]] = {}
    wanted = OWNER_BY_SCOPE.get(scope or "")
    if wanted != "provider" and provider is not None:
        errors["provider"] = [f"Must be empty for {scope} rules."]
    if wanted != "api_key" and api_key is not None:
        errors["api_key"] = [f"Must be empty for {scope} rules."]
    if wanted == "provider" and provider is None:
        errors["provider"] = ["Required for provider rules."]
    if wanted == "api_key" and api_key is None:
        errors["api_key"] = ["Required for API key rules."]
    return errors


def replace_chain(
    entries: list[dict[str, Any]],
    *,
    scope: str,
    provider: Provider | None = None,
    api_key: ApiKey | None = None,
) -> list[ErrorTree]:
    """Replace the stored chain of one owner by ``entries``, in order (omitted fields: defaults)."""
    TransformRule.objects.filter(scope=scope, provider=provider, api_key=api_key).delete()
    errors: list[ErrorTree] = []
    for position, entry in enumerate(entries):
        rule = TransformRule(scope=scope, provider=provider, api_key=api_key, position=position)
        assign(
            rule,
            {**entry, "transform": canonical_transform(entry["transform"])},
            RULE_FIELDS,
            reset_missing=True,
        )
        errors.append(save_checked(rule))
    return errors
