"""Mutable state of one mock server: recorded requests, fail counters, scripted turns, counters."""

from __future__ import annotations

from collections import deque
from typing import Any

from gateway.mock_upstream.prompt_cache import PromptCache


class MockState:
    """All state lives on the event loop thread; readers use the ``/_mock/*`` endpoints."""

    def __init__(self, max_recorded: int = 2000) -> None:
        self.requests: deque[dict[str, Any]] = deque(maxlen=max_recorded)
        self.fail_counts: dict[str, int] = {}
        self.script: deque[dict[str, Any]] = deque()
        self.in_flight = 0
        self.total = 0
        self.client_disconnects = 0
        self.image_hits: list[str] = []  # GET /_mock/images/... paths, in order
        self.server_state: Any = None  # uvicorn ServerState when the runner attaches it
        self.prompt_caches: dict[str, PromptCache] = {}

    def should_fail(self, key: str, times: int) -> bool:
        """Count one request under ``key``; true while the count is within the first ``times``."""
        seen = self.fail_counts.get(key, 0) + 1
        self.fail_counts[key] = seen
        return seen <= times

    def stats(self) -> dict[str, Any]:
        open_connections = None
        if self.server_state is not None:
            open_connections = len(self.server_state.connections)
        return {
            "in_flight": self.in_flight,
            "total_requests": self.total,
            "open_connections": open_connections,
            "client_disconnects": self.client_disconnects,
            "script_remaining": len(self.script),
        }

    def reset(self) -> None:
        self.requests.clear()
        self.fail_counts.clear()
        self.script.clear()
        self.image_hits.clear()
        self.prompt_caches.clear()
