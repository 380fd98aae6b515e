"""REST serializers for gateway-wide objects, and the helper every serializer uses to run model
validation (``full_clean()``) and report it field by field."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import NON_FIELD_ERRORS, ValidationError
from django.db import models
from rest_framework import serializers

from gateway.models import GlobalSettings


def model_errors(obj: models.Model, *, exclude: list[str] | None = None,
                 aliases: dict[str, str] | None = None) -> dict[str, list[str]]:
    """``obj.full_clean()`` as a DRF error dict (field -> messages); empty when valid."""
    try:
        obj.full_clean(exclude=exclude)
    except ValidationError as exc:
        details = exc.message_dict if hasattr(exc, "error_dict") else {NON_FIELD_ERRORS: exc.messages}
        out: dict[str, list[str]] = {}
        for name, messages in details.items():
            key = "non_field_errors" if name == NON_FIELD_ERRORS else (aliases or {}).get(name, name)
            out.setdefault(key, []).extend(messages)
        return out
    return {}


def clean_or_raise(obj: models.Model, **kwargs: Any) -> None:
    errors = model_errors(obj, **kwargs)
    if errors:
        raise serializers.ValidationError(errors)


class GlobalSettingsSerializer(serializers.ModelSerializer):
    class Meta:
        model = GlobalSettings
        exclude = ("id",)
        read_only_fields = ("updated_at",)

    def update(self, instance: GlobalSettings, validated_data: dict[str, Any]) -> GlobalSettings:
        for name, value in validated_data.items():
            setattr(instance, name, value)
        clean_or_raise(instance)
        instance.save()
        return instance
