"""REST serializer for client API keys.

The secret is returned once, as ``secret`` in the create response (or by the ``rotate``
action); reads show only ``prefix``. ``key`` may fix a known secret at creation (reproducible
set-ups, like ``loadconfig``); it cannot be changed afterwards except by rotating.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from rest_framework import serializers

from gateway.crypto import hash_api_key
from gateway.serializers import model_errors
from keys.models import ApiKey

MIN_SECRET_LEN = 12


class ApiKeySerializer(serializers.ModelSerializer):
    key = serializers.CharField(write_only=True, required=False, min_length=MIN_SECRET_LEN, max_length=512,
                                trim_whitespace=False, style={"input_type": "password"},
                                help_text="Optional fixed secret, at creation only; generated when left out.")

    class Meta:
        model = ApiKey
        fields = ("id", "name", "key", "prefix", "owner", "enabled", "expires_at", "allowed_models",
                  "model_redirects", "capture_mode", "created_at", "last_used_at")
        read_only_fields = ("prefix", "created_at", "last_used_at")

    def validate_key(self, value: str) -> str:
        if self.instance is not None:
            raise serializers.ValidationError("The secret cannot be set on update; use the rotate action.")
        if any(ch.isspace() for ch in value):
            raise serializers.ValidationError("The secret must not contain spaces.")
        if ApiKey.objects.filter(key_hash=hash_api_key(value)).exists():
            raise serializers.ValidationError("This secret already belongs to another API key.")
        return value

    def create(self, validated_data: dict[str, Any]) -> ApiKey:
        secret = validated_data.pop("key", None)
        key = ApiKey(**validated_data)
        issued = key.set_secret(secret)
        self._save(key)
        key._gw_issued_secret = issued  # read once by to_representation of this response
        return key

    def update(self, instance: ApiKey, validated_data: dict[str, Any]) -> ApiKey:
        for name, value in validated_data.items():
            setattr(instance, name, value)
        self._save(instance)
        return instance

    def _save(self, key: ApiKey) -> None:
        errors = model_errors(key, aliases={"key_hash": "key", "capture_mode": "capture_mode"})
        if errors:
            raise serializers.ValidationError(errors)
        with transaction.atomic():
            key.save()

    def to_representation(self, instance: ApiKey) -> dict[str, Any]:
        data = super().to_representation(instance)
        secret = getattr(instance, "_gw_issued_secret", None)
        if secret is not None:
            data["secret"] = secret
        return data
