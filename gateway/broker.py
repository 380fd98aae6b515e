"""The broker side of the hand-off: telling an outage from a bad payload, and making a Celery
app's publishes fail fast instead of blocking the writer for seconds per attempt."""

from __future__ import annotations

from typing import Any

from gateway.conf import gateway_settings


class DeliveryPaused(Exception):
    """The circuit around the broker (or database) is open: nothing was tried."""


def is_outage(exc: BaseException) -> bool:
    """Whether a failed delivery says the target is down (retry later, the payload is fine)
    rather than that this payload cannot be written."""
    if isinstance(exc, DeliveryPaused | ConnectionError | TimeoutError | OSError):
        return True
    try:
        from kombu.exceptions import OperationalError as KombuOperationalError

        if isinstance(exc, KombuOperationalError):
            return True
    except ImportError:  # pragma: no cover - kombu comes with celery
        pass
    try:
        from redis.exceptions import ConnectionError as RedisConnectionError
        from redis.exceptions import TimeoutError as RedisTimeoutError

        if isinstance(exc, RedisConnectionError | RedisTimeoutError):
            return True
    except ImportError:  # pragma: no cover
        pass
    from django.db import InterfaceError
    from django.db import OperationalError as DbOperationalError

    return isinstance(exc, DbOperationalError | InterfaceError)


def configure_fail_fast(app: Any, timeout: float | None = None) -> Any:
    """Short connect and send timeouts and no reconnect loop on a Celery app's broker: a publish
    to a dead or silent broker fails within about ``timeout`` seconds."""
    t = gateway_settings.CAPTURE_BROKER_TIMEOUT if timeout is None else timeout
    opts = dict(app.conf.broker_transport_options or {})
    opts.update(socket_connect_timeout=t, socket_timeout=t, max_retries=0, connect_retries_timeout=t)
    app.conf.broker_transport_options = opts
    app.conf.broker_connection_timeout = t
    return app
