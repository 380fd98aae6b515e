"""REST serializer for transform rules in every scope.

The owner must match the scope (``provider`` for provider rules, ``api_key`` for key rules,
neither for global rules); the transform id is canonicalised (legacy aliases accepted); the rule
is validated by ``transforms.validation.validate_rule`` through the model's ``full_clean()``, so an
unknown transform, an unsupported phase or scope, or a config that fails the transform's schema
comes back as a field-level 400 and never reaches the hot path. ``position`` defaults to the end
of the rule's chain. The owner and transform-id rules are ``transforms.services``, shared with
``loadconfig``.
"""

from __future__ import annotations

import copy
from typing import Any

from django.db.models import Max
from rest_framework import serializers

from gateway.writes import model_errors
from transforms.models import TransformRule
from transforms.services import RULE_FIELDS, canonical_transform, owner_errors


class TransformRuleSerializer(serializers.ModelSerializer):
    position = serializers.IntegerField(required=False, min_value=0)
    models = serializers.JSONField(required=False, allow_null=True)
    config = serializers.JSONField(required=False)

    class Meta:
        model = TransformRule
        fields = ("id", "scope", "provider", "api_key", "position", *RULE_FIELDS)

    def validate_transform(self, value: str) -> str:
        return canonical_transform(value)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        inst = self.instance
        scope = attrs.get("scope", inst.scope if inst else None)
        provider = attrs.get("provider", inst.provider if inst else None)
        api_key = attrs.get("api_key", inst.api_key if inst else None)
        errors = owner_errors(scope, provider, api_key)
        if errors:
            raise serializers.ValidationError(errors)
        rule = copy.copy(inst) if inst else TransformRule()  # validate without touching the instance
        for name, value in attrs.items():
            setattr(rule, name, value)
        if rule.config is None:
            rule.config = {}
            attrs["config"] = {}
        if "position" not in attrs and inst is None:
            last = TransformRule.objects.filter(scope=scope, provider=provider, api_key=api_key).aggregate(
                m=Max("position")
            )["m"]
            rule.position = attrs["position"] = 0 if last is None else last + 1
        errors = model_errors(rule)
        if errors:
            raise serializers.ValidationError(errors)
        return attrs
