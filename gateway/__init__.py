"""The project package. ``celery_app`` is the Celery application (``celery -A gateway`` finds it
in ``gateway.celery``); it is imported on first use, not with the package: the /v1 server
workers only hand work to Celery by task name (``gateway.handoff``), and Celery, kombu and amqp
cost each of them ~7 MB of RSS (issue 20: idle RSS)."""

from typing import Any

__all__ = ["celery_app"]


def __getattr__(name: str) -> Any:
    if name == "celery_app":
        from .celery import app

        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
