"""Retention: request-log rows older than ``GATEWAY_REQUEST_LOG_RETENTION_DAYS`` (90) go, in
batches so one pass never holds a long lock. Run hourly by Celery beat
(``requestlogs.tasks.enforce_retention``) and by ``manage.py purgerequestlogs``."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.utils import timezone

from gateway.conf import gateway_settings
from requestlogs.models import RequestLog

log = logging.getLogger("requestlogs")
BATCH = 1000


def purge_by_age(days: int, now: datetime | None = None) -> int:
    cutoff = (now or timezone.now()) - timedelta(days=days)
    deleted = 0
    while True:
        ids = list(
            RequestLog.objects.filter(created_at__lt=cutoff)
            .order_by("created_at", "id")
            .values_list("pk", flat=True)[:BATCH]
        )
        if not ids:
            return deleted
        deleted += RequestLog.objects.filter(pk__in=ids).delete()[0]


def enforce(now: datetime | None = None, days: int | None = None) -> int:
    days = int(gateway_settings.REQUEST_LOG_RETENTION_DAYS if days is None else days)
    deleted = purge_by_age(max(days, 1), now)
    if deleted:
        log.info("request-log retention: deleted %d row(s) older than %d days", deleted, days)
    return deleted
