"""The configuration version: bumped on every saved change (admin, REST API, loadconfig), polled
by every gateway worker, which rebuilds its in-process snapshot when it moves.

With REDIS_URL the counter lives in Redis (``INCR``); without, in the ConfigVersion row. Polling
runs off the request path (a background thread), never per request.
"""

from __future__ import annotations

import logging
import secrets

from django.conf import settings
from django.db import transaction

log = logging.getLogger("gateway.config")
REDIS_KEY = "gateway:config_version"
_redis = None


def _client():
    global _redis
    if _redis is None and settings.REDIS_URL:
        import redis

        _redis = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=1, socket_connect_timeout=1)
    return _redis


def _bump_db() -> None:
    # A fresh random value rather than +1: a worker only needs "changed", and a table that is
    # emptied and refilled (tests, restores) can never land back on the value it saw last.
    from gateway.models import ConfigVersion

    ConfigVersion.objects.update_or_create(pk=1, defaults={"version": secrets.randbits(62) + 1})


def bump() -> None:
    """Signal a configuration change; takes effect when the surrounding transaction commits."""

    def _do() -> None:
        _bump_db()
        client = _client()
        if client is not None:
            try:
                client.incr(REDIS_KEY)
            except Exception:  # the DB counter still moves; workers also poll it
                log.warning("could not bump the config version in Redis; workers fall back to the database")

    transaction.on_commit(_do)


def current() -> tuple[int, int]:
    """(database version, redis version). Called from the poller thread only."""
    from gateway.models import ConfigVersion

    row = ConfigVersion.objects.filter(pk=1).values_list("version", flat=True).first() or 0
    redis_version = 0
    client = _client()
    if client is not None:
        try:
            redis_version = int(client.get(REDIS_KEY) or 0)
        except Exception:
            redis_version = -1
    return row, redis_version
