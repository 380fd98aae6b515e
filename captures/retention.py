"""Retention: captures older than ``GlobalSettings.capture_retention_days`` go, then the oldest
go until the stored total fits ``GlobalSettings.capture_max_total_mb``. Deletes run in batches
so one pass never holds a long lock. Run hourly by Celery beat (``captures.tasks.enforce_retention``),
after each write by the writers (size step only), and by ``manage.py purgecaptures``."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Sum
from django.utils import timezone

from captures.models import Capture

log = logging.getLogger("captures")
BATCH = 400


@dataclass(slots=True)
class Purged:
    by_age: int = 0
    by_size: int = 0


def _delete_ids(ids: list[int]) -> int:
    deleted = 0
    for i in range(0, len(ids), BATCH):
        deleted += Capture.objects.filter(pk__in=ids[i : i + BATCH]).delete()[0]
    return deleted


def purge_by_age(days: int, now: datetime | None = None) -> int:
    cutoff = (now or timezone.now()) - timedelta(days=days)
    deleted = 0
    while True:
        ids = list(
            Capture.objects.filter(created_at__lt=cutoff)
            .order_by("created_at", "id")
            .values_list("pk", flat=True)[:BATCH]
        )
        if not ids:
            return deleted
        deleted += _delete_ids(ids)


def purge_by_size(max_total_bytes: int) -> int:
    """Oldest first until the sum of stored sizes is within the budget."""
    total = Capture.objects.aggregate(total=Sum("size_bytes"))["total"] or 0
    excess = total - max_total_bytes
    if excess <= 0:
        return 0
    ids: list[int] = []
    freed = 0
    for pk, size in (
        Capture.objects.order_by("created_at", "id").values_list("pk", "size_bytes").iterator(chunk_size=2000)
    ):
        ids.append(pk)
        freed += size
        if freed >= excess:
            break
    return _delete_ids(ids)


def enforce(now: datetime | None = None) -> Purged:
    from gateway.models import GlobalSettings

    gs = GlobalSettings.current()
    result = Purged(
        by_age=purge_by_age(gs.capture_retention_days, now),
        by_size=purge_by_size(gs.capture_max_total_mb * 1024 * 1024),
    )
    if result.by_age or result.by_size:
        log.info("capture retention: deleted %d by age, %d by size", result.by_age, result.by_size)
    return result


def enforce_size() -> int:
    from gateway.models import GlobalSettings

    return purge_by_size(GlobalSettings.current().capture_max_total_mb * 1024 * 1024)
