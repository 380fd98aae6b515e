"""REST serializers for providers with nested channels and channel models.

A provider is written as one document: ``channels`` (each with ``models``) is the full list;
entries are matched by ``id`` when given, else by name (``model`` for models); stored entries the
list no longer names are deleted. Leaving ``channels`` out of a PATCH leaves them alone.
A channel's ``api_key`` is write-only: required for a new channel, an empty or missing value
keeps the stored key, and reads only say ``has_api_key``. Every object goes through
``full_clean()``; a problem anywhere fails the whole write with nested field errors.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import Any

from django.db import transaction
from rest_framework import serializers

from gateway.serializers import model_errors
from providers.models import Channel, ChannelModel, Provider


class MultiplierField(serializers.Field):
    """A positive decimal in canonical text form (``"1"``, ``"0.5"``); never a binary float."""

    default_error_messages = {"invalid": "Must be a decimal number, for example \"1\" or \"0.25\"."}

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


class ChannelModelSerializer(serializers.ModelSerializer):
    id = serializers.IntegerField(required=False)
    multiplier = MultiplierField(required=False)

    class Meta:
        model = ChannelModel
        fields = ("id", "model", "upstream_model", "multiplier")
        validators: list = []


class ChannelSerializer(serializers.ModelSerializer):
    id = serializers.IntegerField(required=False)
    api_key = serializers.CharField(write_only=True, required=False, allow_blank=True, trim_whitespace=True,
                                    style={"input_type": "password"})
    has_api_key = serializers.BooleanField(read_only=True)
    models = ChannelModelSerializer(many=True, required=False)

    class Meta:
        model = Channel
        fields = ("id", "name", "protocol", "base_url", "api_key", "has_api_key", "weight", "enabled",
                  "extra_headers", "models", "created_at", "updated_at")
        read_only_fields = ("created_at", "updated_at")
        validators: list = []


def _duplicates(items: list[dict[str, Any]], key: str) -> list[dict[str, list[str]]]:
    seen: set[str] = set()
    errors: list[dict[str, list[str]]] = []
    for item in items:
        name = str(item.get(key, "")).strip()
        errors.append({key: [f"Duplicate {key} {name!r}."]} if name in seen else {})
        seen.add(name)
    return errors


def _by_index(errors: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Nested list errors keyed by index, the shape DRF itself uses for list fields."""
    return {str(i): e for i, e in enumerate(errors) if e}


class ProviderSerializer(serializers.ModelSerializer):
    channels = ChannelSerializer(many=True, required=False)

    class Meta:
        model = Provider
        fields = ("id", "name", "enabled", "priority", "max_retries", "channel_max_retries",
                  "channel_retry_interval_ms", "request_timeout_seconds", "circuit_breaker_enabled",
                  "strip_cross_protocol_nested", "extra_fields_whitelist", "affinity_mode",
                  "affinity_failback_seconds", "channels", "created_at", "updated_at")
        read_only_fields = ("created_at", "updated_at")

    def create(self, validated_data: dict[str, Any]) -> Provider:
        return self._write(Provider(), validated_data)

    def update(self, instance: Provider, validated_data: dict[str, Any]) -> Provider:
        return self._write(instance, validated_data)

    # -- writing ------------------------------------------------------------------------
    def _write(self, provider: Provider, data: dict[str, Any]) -> Provider:
        channels = data.pop("channels", None)
        for name, value in data.items():
            setattr(provider, name, value)
        with transaction.atomic():
            errors = model_errors(provider)
            if errors:
                raise serializers.ValidationError(errors)
            provider.save()
            if channels is not None:
                channel_errors = self._write_channels(provider, channels)
                if any(channel_errors):
                    raise serializers.ValidationError({"channels": _by_index(channel_errors)})
        return provider

    def _write_channels(self, provider: Provider, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        existing = {c.pk: c for c in provider.channels.all()}
        by_name = {c.name: c for c in existing.values()}
        errors = _duplicates(items, "name")
        if any(errors):
            return errors
        kept: set[int] = set()
        for i, item in enumerate(items):
            item = dict(item)
            models = item.pop("models", None)
            secret = item.pop("api_key", "") or ""
            pk = item.pop("id", None)
            if pk is not None:
                channel = existing.get(pk)
                if channel is None:
                    errors[i] = {"id": [f"No channel {pk} on this provider."]}
                    continue
            else:
                channel = by_name.get(str(item.get("name", "")).strip()) or Channel(provider=provider)
            for name, value in item.items():
                setattr(channel, name, value)
            if secret:
                channel.set_api_key(secret)
            elif not channel.has_api_key:
                errors[i] = {"api_key": ["Required for a new channel."]}
                continue
            errs = model_errors(channel)
            if errs:
                errors[i] = errs
                continue
            channel.save()
            kept.add(channel.pk)
            if models is not None:
                model_errs = self._write_models(channel, models)
                if any(model_errs):
                    errors[i] = {"models": _by_index(model_errs)}
        if not any(errors):
            provider.channels.exclude(pk__in=kept).delete()
        return errors

    def _write_models(self, channel: Channel, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        existing = {m.pk: m for m in channel.models.all()}
        by_name = {m.model: m for m in existing.values()}
        errors = _duplicates(items, "model")
        if any(errors):
            return errors
        kept: set[int] = set()
        for i, item in enumerate(items):
            item = dict(item)
            pk = item.pop("id", None)
            if pk is not None:
                entry = existing.get(pk)
                if entry is None:
                    errors[i] = {"id": [f"No model entry {pk} on this channel."]}
                    continue
            else:
                entry = by_name.get(str(item.get("model", "")).strip()) or ChannelModel(channel=channel)
            entry.upstream_model = ""
            entry.multiplier = Decimal("1")
            for name, value in item.items():
                setattr(entry, name, value)
            errs = model_errors(entry)
            if errs:
                errors[i] = errs
                continue
            entry.save()
            kept.add(entry.pk)
        if not any(errors):
            channel.models.exclude(pk__in=kept).delete()
        return errors
