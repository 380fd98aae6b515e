"""The per-request log line: one record on the ``gateway.access`` logger at the end of every
generation request, with the request id, protocol, model, route, status, timing and attempts.

``LOGGING`` (``gateway.settings``) formats it with :class:`JsonFormatter` (``GATEWAY_LOG_FORMAT=json``:
one JSON object per line, every record, access lines with their fields as keys) or
:class:`TextFormatter` (the default: a readable access line, what ``make run`` shows). The level
of the access line is the ``ACCESS_LOG_LEVEL`` knob; nothing is formatted when that level is off.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import orjson

log = logging.getLogger("gateway.access")


def emit(level: int, fields: dict[str, Any]) -> None:
    """Log one request's fields (the caller checked ``log.isEnabledFor(level)``)."""
    log.log(level, "%s", _human(fields), extra={"fields": fields})


def _human(f: dict[str, Any]) -> str:
    route = f"{f['provider']}/{f['channel']}" if f.get("channel") else "-"
    text = (
        f"{f['request_id']} {f['protocol']} {f['model'] or '-'} -> {f['status']} "
        f"{f['duration_ms']:.1f}ms ttfb={_ms(f.get('ttfb_ms'))} attempts={f['attempts']} via {route}"
    )
    if not f["model"] and f.get("endpoint"):  # answered before a model was known: say where
        text += f" endpoint={f['endpoint']}"
    if f.get("stream"):
        text += " stream"
    if f.get("key"):
        text += f" key={f['key']}"
    if f.get("error"):
        text += f" error={f['error']!r}"
    return text


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}ms"


class JsonFormatter(logging.Formatter):
    """Every record as one JSON object: ``ts``, ``level``, ``logger``, then an access record's
    fields, or ``message`` (and ``exc``) for any other record."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
        }
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            out.update(fields)
        else:
            out["message"] = record.getMessage()
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return orjson.dumps(out, default=str).decode()


class TextFormatter(logging.Formatter):
    """``2026-12-01 17:00:00 INFO gateway.access <request line>``: the readable default."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s %(message)s")
