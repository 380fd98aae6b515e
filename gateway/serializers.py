"""REST serializers for gateway-wide objects. Validation and saving are ``gateway.services``
(shared with ``loadconfig``); ``model_errors`` lives in ``gateway.writes`` and is re-exported."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from gateway.models import GlobalSettings
from gateway.services import write_settings
from gateway.writes import model_errors

__all__ = ["GlobalSettingsSerializer", "model_errors"]


class GlobalSettingsSerializer(serializers.ModelSerializer):
    class Meta:
        model = GlobalSettings
        exclude = ("id",)
        read_only_fields = ("updated_at",)

    def update(self, instance: GlobalSettings, validated_data: dict[str, Any]) -> GlobalSettings:
        errors = write_settings(instance, validated_data)
        if errors:
            raise serializers.ValidationError(errors)
        return instance
