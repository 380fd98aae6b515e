"""Per-key request limits count in fixed calendar minutes (``gateway.proxy.limits``): a test that
expects its second request refused must not straddle two windows."""

from __future__ import annotations

import time


def wait_for_fresh_minute(margin: float = 15.0) -> None:
    """Start a burst early in a minute window so it cannot straddle two windows."""
    if time.time() % 60 > 60 - margin:
        time.sleep(60 - time.time() % 60 + 0.5)
