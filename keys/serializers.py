"""REST serializer for client API keys.

The secret is returned once, as ``secret`` in the create response (or by the ``rotate``
action); reads show only ``prefix``. ``key`` may fix a known secret at creation (reproducible
set-ups, like ``loadconfig``); it cannot be changed afterwards except by rotating.
Validation and saving are ``keys.services.write_api_key``, shared with ``loadconfig``.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from rest_framework import serializers

from keys.models import ApiKey
from keys.services import API_KEY_FIELDS, MIN_SECRET_LEN, write_api_key


class ApiKeySerializer(serializers.ModelSerializer):
    key = serializers.CharField(
        write_only=True,
        required=False,
        min_length=MIN_SECRET_LEN,
        max_length=512,
        trim_whitespace=False,
        style={"input_type": "password"},
        help_text="Optional fixed secret, at creation only; generated when left out.",
    )

    class Meta:
        model = ApiKey
        fields = ("id", *API_KEY_FIELDS, "key", "prefix", "created_at", "last_used_at")
        read_only_fields = ("prefix", "created_at", "last_used_at")

    def validate_key(self, value: str) -> str:
        if self.instance is not None:
            raise serializers.ValidationError("The secret cannot be set on update; use the rotate action.")
        if any(ch.isspace() for ch in value):
            raise serializers.ValidationError("The secret must not contain spaces.")
        return value

    def create(self, validated_data: dict[str, Any]) -> ApiKey:
        secret = validated_data.pop("key", None)
        key = self._write(ApiKey(), validated_data, secret=secret)
        key._gw_issued_secret = secret or key._gw_issued_secret  # read once by to_representation
        return key

    def update(self, instance: ApiKey, validated_data: dict[str, Any]) -> ApiKey:
        return self._write(instance, validated_data)

    def _write(self, key: ApiKey, data: dict[str, Any], *, secret: str | None = None) -> ApiKey:
        with transaction.atomic():
            errors, issued = write_api_key(key, data, secret=secret)
            if errors:
                raise serializers.ValidationError(errors)
        key._gw_issued_secret = issued
        return key

    def to_representation(self, instance: ApiKey) -> dict[str, Any]:
        data = super().to_representation(instance)
        secret = getattr(instance, "_gw_issued_secret", None)
        if secret is not None:
            data["secret"] = secret
        return data
