"""The per-request log line: JSON with the request's fields, or a readable text line."""

from __future__ import annotations

import io
import json
import logging

from gateway.observe import accesslog
from gateway.observe.accesslog import JsonFormatter, TextFormatter

FIELDS = {
    "request_id": "req-1",
    "protocol": "messages",
    "model": "m1",
    "stream": True,
    "status": 502,
    "duration_ms": 12.5,
    "ttfb_ms": None,
    "attempts": 2,
    "provider": "p",
    "channel": "c",
    "key": "k",
    "error": "upstream_error: boom",
    "input_tokens": None,
    "output_tokens": None,
}


def _capture(formatter: logging.Formatter) -> str:
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(formatter)
    accesslog.log.addHandler(handler)
    old = accesslog.log.level
    accesslog.log.setLevel(logging.INFO)
    try:
        accesslog.emit(logging.INFO, dict(FIELDS))
    finally:
        accesslog.log.removeHandler(handler)
        accesslog.log.setLevel(old)
    return out.getvalue()


def test_json_line_carries_every_field():
    line = _capture(JsonFormatter())
    assert line.count("\n") == 1
    row = json.loads(line)
    assert row["logger"] == "gateway.access" and row["level"] == "INFO" and row["ts"].endswith("Z")
    for name, value in FIELDS.items():
        assert row[name] == value


def test_json_formatter_wraps_ordinary_records():
    record = logging.LogRecord("gateway.proxy", logging.WARNING, __file__, 1, "hello %s", ("x",), None)
    assert json.loads(JsonFormatter().format(record))["message"] == "hello x"


def test_text_line_is_readable():
    line = _capture(TextFormatter())
    assert "gateway.access req-1 messages m1 -> 502 12.5ms ttfb=- attempts=2 via p/c stream key=k" in line
    assert "error='upstream_error: boom'" in line
