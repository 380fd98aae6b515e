"""Celery tasks of the upstream topology: the scheduled channel health probes."""

from __future__ import annotations

from celery import shared_task


@shared_task(name="providers.tasks.probe_channels", ignore_result=True)
def probe_channels() -> dict[str, int]:
    """One health probe per enabled channel (``providers.health``)."""
    from providers.health import probe_all

    results = probe_all()
    return {"checked": len(results), "failed": sum(1 for r in results if not r["ok"])}
