"""Every saved configuration change bumps the config version, so every worker rebuilds its
in-process snapshot within a poll interval (see ``gateway.config_version``).

Receivers are connected from ``GatewayConfig.ready()`` with explicit senders: a sender-less
``post_delete`` receiver would disable Django's fast-delete path for every model, captures
included.

One transaction bumps at most once: a provider saved in admin with its inlines, or a whole
``loadconfig``, is many saves but one change for the workers.
"""

from __future__ import annotations

from django.db import DEFAULT_DB_ALIAS, connections, transaction
from django.db.models.signals import post_delete, post_save

from gateway import config_version

# Saves that touch only these fields are bookkeeping, not configuration.
_BOOKKEEPING_FIELDS = frozenset({"last_used_at", "updated_at"})


def _bump_after_commit() -> None:
    config_version.bump()


def request_bump(using: str = DEFAULT_DB_ALIAS) -> None:
    """Bump once when the current transaction commits (immediately in autocommit mode)."""
    connection = connections[using]
    if connection.in_atomic_block:
        # Django keeps pending callbacks here; a rolled-back savepoint discards ours with it.
        if any(entry[1] is _bump_after_commit for entry in connection.run_on_commit):
            return
        transaction.on_commit(_bump_after_commit, using=using)
    else:
        _bump_after_commit()


def on_config_saved(sender, instance, update_fields=None, using=DEFAULT_DB_ALIAS, **kwargs) -> None:
    if update_fields and frozenset(update_fields) <= _BOOKKEEPING_FIELDS:
        return
    request_bump(using)


def on_config_deleted(sender, instance, using=DEFAULT_DB_ALIAS, **kwargs) -> None:
    request_bump(using)


def config_models() -> list[type]:
    """The models whose rows make up the live configuration, proxies included (signals are sent
    with the proxy class as sender)."""
    from django.apps import apps

    from gateway.models import GlobalSettings
    from keys.models import ApiKey
    from providers.models import Channel, ChannelModel, Provider
    from transforms.models import TransformRule

    concrete = {Provider, Channel, ChannelModel, ApiKey, TransformRule, GlobalSettings}
    return [m for m in apps.get_models(include_auto_created=False) if m._meta.concrete_model in concrete]


def connect() -> None:
    for model in config_models():
        post_save.connect(on_config_saved, sender=model, dispatch_uid=f"gw-config-save-{model._meta.label}")
        post_delete.connect(on_config_deleted, sender=model, dispatch_uid=f"gw-config-delete-{model._meta.label}")
