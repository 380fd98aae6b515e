"""The broker side of the hand-off: telling an outage from a bad payload, and making a Celery
app's publishes fail fast instead of blocking the writer for seconds per attempt."""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

from gateway.conf import gateway_settings

T = TypeVar("T")


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


# Celery tasks that write to the database outlast its outages instead of dropping the payload.
# First the task waits for the database in place (``wait_out_db_outage``: it tries again every
# ``DB_WAIT_STEP`` seconds for up to ``DB_WAIT_MAX``), so a worker pauses on the first row of an
# outage rather than cycling every queued task through failures, and the rows are written within
# a fraction of a second of its return; the tasks behind it stay queued in the broker. A longer
# outage falls to Celery's retry (the task is re-published with a countdown, at most
# ``DB_RETRY_BACKOFF_MAX`` seconds, jittered); after ``DB_RETRY_MAX`` retries (hours) it fails
# and Celery logs it.
DB_WAIT_STEP = 0.25
DB_WAIT_MAX = 10.0
DB_RETRY_BACKOFF_MAX = 2
DB_RETRY_MAX = 1800


def db_outage_retry() -> dict[str, Any]:
    """``shared_task`` options for a task that only writes rows: retry on a database outage."""
    from django.db import InterfaceError, OperationalError

    return {
        "autoretry_for": (OperationalError, InterfaceError),
        "retry_backoff": 1,
        "retry_backoff_max": DB_RETRY_BACKOFF_MAX,
        "retry_jitter": True,
        "max_retries": DB_RETRY_MAX,
    }


def wait_out_db_outage(fn: Callable[..., T]) -> Callable[..., T]:
    """Runs ``fn`` again while the database is unreachable, for up to ``DB_WAIT_MAX`` seconds
    (closing the broken connections between tries), then lets the error through."""
    from django.db import InterfaceError, OperationalError, connections

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> T:
        deadline = time.monotonic() + DB_WAIT_MAX
        while True:
            try:
                return fn(*args, **kwargs)
            except (OperationalError, InterfaceError):
                if time.monotonic() >= deadline:
                    raise
                connections.close_all()
                time.sleep(DB_WAIT_STEP)

    return run


def save_or_split(
    items: list[Any],
    save: Callable[[list[Any]], int],
    *,
    log: logging.Logger,
    label: str,
    request_id: Callable[[Any], str],
) -> int:
    """``save(items)`` for a task that writes a batch. A batch that fails for a reason of its own
    is saved item by item, and an item that still fails is logged with its request id and
    dropped: one item that cannot be stored costs only itself, not every item of the task. A
    database outage is raised, for the task to be retried whole (stored ids are skipped then)."""
    from django.db import InterfaceError, OperationalError

    try:
        return save(items)
    except (OperationalError, InterfaceError):
        raise
    except Exception:
        if len(items) == 1:
            log.exception("%s dropped: request_id=%s", label, request_id(items[0]))
            return 0
        log.warning("%s batch of %d failed; storing it one by one", label, len(items), exc_info=True)
    saved = 0
    for item in items:
        try:
            saved += save([item])
        except (OperationalError, InterfaceError):
            raise
        except Exception:
            log.exception("%s dropped: request_id=%s", label, request_id(item))
    return saved
