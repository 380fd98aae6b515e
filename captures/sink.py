"""Hand-off point from the proxy to capture persistence. Replaced by the capture issue's writer."""

from __future__ import annotations

from captures.record import CaptureRecord


def submit(record: CaptureRecord) -> None:
    """Never blocks, never raises: persisting a capture must not touch the client's response."""
    return None
