"""The Celery worker's consumer, reconnecting to the broker within about a second of its return.

Celery's consumer retries a lost broker connection with kombu's default schedule (2 s, then 2 s
more each time, up to 30 s): after a 30 s Redis outage the worker sat idle for up to 12 s more,
and captures handed off meanwhile waited with it. Issue 13 wants everything back within 5 s of
Redis returning, so the worker retries every half second (``CELERY_WORKER_CONSUMER`` in settings),
for as long as the outage lasts (``CELERY_BROKER_CONNECTION_MAX_RETRIES = None``).
"""

from __future__ import annotations

import functools
from typing import Any

from celery.worker.consumer import Consumer

RECONNECT_INTERVAL = 0.5  # seconds between attempts to reach the broker again


class QuickReconnectConsumer(Consumer):
    def ensure_connected(self, conn: Any) -> Any:
        conn.ensure_connection = functools.partial(
            conn.ensure_connection,
            interval_start=RECONNECT_INTERVAL / 2,
            interval_step=RECONNECT_INTERVAL / 2,
            interval_max=RECONNECT_INTERVAL,
        )
        return super().ensure_connected(conn)
