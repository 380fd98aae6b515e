"""Writing providers, their channels and channel models: the one path the REST serializer and
``loadconfig`` share (the admin's channel form shares the secret rule, :func:`set_channel_secret`).

Channels are matched by ``id`` when given (REST), else by name; channel models by ``model``.
Every object goes through ``full_clean()``; errors come back as an error tree (see
``gateway.writes``) and the caller's transaction decides what is kept.
"""

from __future__ import annotations

from typing import Any

from gateway.writes import ErrorTree, Note, assign, by_index, duplicates, editable_fields, save_checked
from providers.models import Channel, ChannelModel, Provider, TriState

# The writable fields, from the models: a new provider field needs no other list.
PROVIDER_FIELDS = editable_fields(Provider)
CHANNEL_FIELDS = editable_fields(Channel, exclude=("provider",))
CHANNEL_MODEL_FIELDS = editable_fields(ChannelModel, exclude=("channel",))


def set_channel_secret(channel: Channel, secret: str | None) -> None:
    """Store a new upstream key when one is given; an empty one keeps the stored key. A channel
    may have no key at all: local upstreams (vLLM, Ollama) need none, and a dump without secrets
    must load into an empty database (its channels then wait for a key, noted by loadconfig)."""
    if secret:
        channel.set_api_key(secret)


def write_provider(
    provider: Provider,
    data: dict[str, Any],
    *,
    channels: list[dict[str, Any]] | None = None,
    reset_missing: bool = False,
    prune: bool = True,
    note: Note | None = None,
) -> ErrorTree:
    """Apply ``data`` (provider fields) and, when given, the full ``channels`` list."""
    if "strip_cross_protocol_nested" in data:
        data = {**data, "strip_cross_protocol_nested": TriState.parse(data["strip_cross_protocol_nested"])}
    assign(provider, data, PROVIDER_FIELDS, reset_missing=reset_missing)
    errors = save_checked(provider, note=note, kind="providers", label=provider.name)
    if errors or channels is None:
        return errors
    channel_errors = write_channels(provider, channels, reset_missing=reset_missing, prune=prune, note=note)
    return {"channels": by_index(channel_errors)} if any(channel_errors) else {}


def write_channels(
    provider: Provider,
    items: list[dict[str, Any]],
    *,
    reset_missing: bool = False,
    prune: bool = True,
    note: Note | None = None,
) -> list[ErrorTree]:
    """Create or update each channel (with its ``models`` when given); with ``prune``, delete the
    stored channels the list no longer names, once everything else is valid."""
    errors = duplicates(items, "name")
    if any(errors):
        return errors
    existing = {c.pk: c for c in provider.channels.all()}
    by_name = {c.name: c for c in existing.values()}
    kept: set[int] = set()
    for i, item in enumerate(items):
        item = dict(item)
        models = item.pop("models", None)
        secret = item.pop("api_key", None)
        pk = item.pop("id", None)
        if pk is not None:
            channel = existing.get(pk)
            if channel is None:
                errors[i] = {"id": [f"No channel {pk} on this provider."]}
                continue
        else:
            name = str(item.get("name", "")).strip()
            channel = by_name.get(name) or Channel(provider=provider, name=name)
        assign(channel, item, CHANNEL_FIELDS, reset_missing=reset_missing)
        set_channel_secret(channel, secret)
        if not channel.has_api_key and note is not None and channel.pk is None:
            note("channels", "keyless", f"{provider.name}/{channel.name}")
        errs = save_checked(channel, note=note, kind="channels", label=f"{provider.name}/{channel.name}")
        if errs:
            errors[i] = errs
            continue
        kept.add(channel.pk)
        if models is not None:
            model_errors = write_channel_models(channel, models, prune=prune, note=note)
            if any(model_errors):
                errors[i] = {"models": by_index(model_errors)}
    if prune and not any(errors):
        for gone in provider.channels.exclude(pk__in=kept):
            if note is not None:
                note("channels", "deleted", f"{provider.name}/{gone.name}")
            gone.delete()
    return errors


def write_channel_models(
    channel: Channel, items: list[dict[str, Any]], *, prune: bool = True, note: Note | None = None
) -> list[ErrorTree]:
    """Each entry describes the whole model mapping (omitted fields take their defaults)."""
    errors = duplicates(items, "model")
    if any(errors):
        return errors
    existing = {m.pk: m for m in channel.models.all()}
    by_name = {m.model: m for m in existing.values()}
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
            name = str(item.get("model", "")).strip()
            entry = by_name.get(name) or ChannelModel(channel=channel, model=name)
        assign(entry, item, CHANNEL_MODEL_FIELDS, reset_missing=True)
        errs = save_checked(entry, note=note, kind="models", label=f"{channel}:{entry.model}")
        if errs:
            errors[i] = errs
            continue
        kept.add(entry.pk)
    if prune and not any(errors):
        for gone in channel.models.exclude(pk__in=kept):
            if note is not None:
                note("models", "deleted", f"{channel}:{gone.model}")
            gone.delete()
    return errors
