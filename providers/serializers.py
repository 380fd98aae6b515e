"""REST serializers for providers with nested channels and channel models.

A provider is written as one document: ``channels`` (each with ``models``) is the full list;
entries are matched by ``id`` when given, else by name (``model`` for models); stored entries the
list no longer names are deleted. Leaving ``channels`` out of a PATCH leaves them alone.
A channel's ``api_key`` is write-only and optional (local upstreams need none); an empty or missing value
keeps the stored key, and reads only say ``has_api_key``. Every object goes through
``full_clean()``; a problem anywhere fails the whole write with nested field errors.

Validation and saving are ``providers.services`` (shared with ``loadconfig``); the field lists
come from the models, so a new provider field needs no edit here.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import Any

from django.db import transaction
from rest_framework import serializers

from providers.models import Channel, ChannelModel, Provider, TriState
from providers.services import CHANNEL_FIELDS, CHANNEL_MODEL_FIELDS, PROVIDER_FIELDS, write_provider


class MultiplierField(serializers.Field):
    """A positive decimal in canonical text form (``"1"``, ``"0.5"``); never a binary float."""

    default_error_messages = {"invalid": 'Must be a decimal number, for example "1" or "0.25".'}

    def to_representation(self, value: Decimal) -> str:
        return format(Decimal(value).normalize(), "f")

    def to_internal_value(self, data: Any) -> Decimal:
        if isinstance(data, bool) or not isinstance(data, str | int | float):
            self.fail("invalid")
        try:
            value = Decimal(str(data).strip())
        except InvalidOperation:
            self.fail("invalid")
        if not value.is_finite():
            self.fail("invalid")
        return value


class TriStateField(serializers.ChoiceField):
    """A tri-state override: ``true``/``false``/``null`` (the config file's spelling) or
    ``"true"``/``"false"``/``"inherit"``; read back in the stored spelling."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(choices=TriState.choices, **kwargs)

    def validate_empty_values(self, data: Any) -> tuple[bool, Any]:
        if data is None:
            return True, TriState.INHERIT.value
        return super().validate_empty_values(data)

    def to_internal_value(self, data: Any) -> str:
        return super().to_internal_value(TriState.parse(data))


class ChannelModelSerializer(serializers.ModelSerializer):
    id = serializers.IntegerField(required=False)
    multiplier = MultiplierField(required=False)

    class Meta:
        model = ChannelModel
        fields = ("id", *CHANNEL_MODEL_FIELDS)
        validators: list = []


class ChannelSerializer(serializers.ModelSerializer):
    id = serializers.IntegerField(required=False)
    api_key = serializers.CharField(
        write_only=True,
        required=False,
        allow_blank=True,
        trim_whitespace=True,
        style={"input_type": "password"},
    )
    has_api_key = serializers.BooleanField(read_only=True)
    models = ChannelModelSerializer(many=True, required=False)

    class Meta:
        model = Channel
        fields = ("id", *CHANNEL_FIELDS, "api_key", "has_api_key", "models", "created_at", "updated_at")
        read_only_fields = ("created_at", "updated_at")
        validators: list = []


class ProviderSerializer(serializers.ModelSerializer):
    channels = ChannelSerializer(many=True, required=False)
    strip_cross_protocol_nested = TriStateField(required=False)

    class Meta:
        model = Provider
        fields = ("id", *PROVIDER_FIELDS, "channels", "created_at", "updated_at")
        read_only_fields = ("created_at", "updated_at")

    def create(self, validated_data: dict[str, Any]) -> Provider:
        return self._write(Provider(), validated_data)

    def update(self, instance: Provider, validated_data: dict[str, Any]) -> Provider:
        return self._write(instance, validated_data)

    def _write(self, provider: Provider, data: dict[str, Any]) -> Provider:
        channels = data.pop("channels", None)
        with transaction.atomic():
            errors = write_provider(provider, data, channels=channels)
            if errors:
                raise serializers.ValidationError(errors)
        return provider
