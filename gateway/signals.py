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


_PENDING_ATTR = "_gw_pending_config_bump"


def request_bump(using: str = DEFAULT_DB_ALIAS) -> None:
    """Bump once when the current transaction commits (immediately in autocommit mode)."""
    connection = connections[using]
    if not connection.in_atomic_block:
        config_version.bump()
        return
    # Django keeps pending callbacks in run_on_commit; a rollback discards ours with it, and a
    # callback that has run clears the marker, so the next transaction registers a fresh one.
    pending = getattr(connection, _PENDING_ATTR, None)
    if pending is not None and any(entry[1] is pending for entry in connection.run_on_commit):
        return

    def bump_after_commit() -> None:
        setattr(connection, _PENDING_ATTR, None)
        config_version.bump()

    setattr(connection, _PENDING_ATTR, bump_after_commit)
    transaction.on_commit(bump_after_commit, using=using)


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
        post_delete.connect(
            on_config_deleted, sender=model, dispatch_uid=f"gw-config-delete-{model._meta.label}"
        )
