"""Fault injection: chosen per request by ``x-mock-*`` headers or by a path prefix.

The gateway never forwards client headers, but a channel can carry extra headers, and a channel's
base URL can carry a prefix such as ``http://127.0.0.1:9100/fault/status=500/v1``. Several faults
go in one segment separated by commas (``/fault/fail-times=2,fail-key=k1/v1``) or in repeated
``/fault/...`` segments. Names are the header names without ``x-mock-``:

- ``status``: answer with this HTTP status and the protocol's error body;
- ``fail-times`` + ``fail-key``: fail the first N requests carrying that key (with ``status``, default
  500), then succeed — for retry tests;
- ``delay-first-byte``: seconds to wait before the response starts;
- ``disconnect-after``: end a stream after N frames, without its terminal event;
- ``malformed-sse``: the second frame of a stream is not valid JSON;
- ``hang``: accept and never answer (until the client goes away);
- ``stall-after``: send N stream frames, then go silent without closing (mid-stream idle timeouts);
- ``frame-delay``: seconds between stream frames (lets tests act mid-stream);
- ``arg-chunk``: size of streamed tool-argument fragments (default: the server's setting, 3);
- ``prompt-cache``: not a fault: simulate the provider's prompt cache and report cached tokens
  (see ``prompt_cache``); the value names the cache, so two channels with different values behave
  like two upstream accounts that do not share a cache.
- ``retry-after``: a ``Retry-After`` header (seconds) on injected status errors.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import unquote

FAULT_NAMES = (
    "status",
    "fail-times",
    "fail-key",
    "delay-first-byte",
    "disconnect-after",
    "malformed-sse",
    "hang",
    "stall-after",
    "frame-delay",
    "arg-chunk",
    "prompt-cache",
    "retry-after",
)


@dataclass(slots=True)
class Faults:
    status: int | None = None
    fail_times: int | None = None
    fail_key: str = ""
    delay_first_byte: float = 0.0
    disconnect_after: int | None = None
    malformed_sse: bool = False
    hang: bool = False
    stall_after: int | None = None
    frame_delay: float = 0.0
    arg_chunk: int | None = None
    prompt_cache: str | None = None  # cache namespace ("1", or e.g. a channel name: separate caches)
    retry_after: str | None = None

    def set(self, name: str, value: str) -> None:
        value = value.strip()
        if name == "status":
            self.status = int(value)
        elif name == "fail-times":
            self.fail_times = int(value)
        elif name == "fail-key":
            self.fail_key = value
        elif name == "delay-first-byte":
            self.delay_first_byte = float(value)
        elif name == "disconnect-after":
            self.disconnect_after = int(value)
        elif name == "malformed-sse":
            self.malformed_sse = value.lower() not in ("", "0", "false", "no")
        elif name == "hang":
            self.hang = value.lower() not in ("", "0", "false", "no")
        elif name == "stall-after":
            self.stall_after = int(value)
        elif name == "frame-delay":
            self.frame_delay = float(value)
        elif name == "prompt-cache":
            self.prompt_cache = None if value.lower() in ("", "0", "false", "no") else value
        elif name == "arg-chunk":
            self.arg_chunk = max(1, int(value))
        elif name == "retry-after":
            self.retry_after = value


def split_fault_prefix(path: str, faults: Faults) -> str:
    """Consume leading ``/fault/<k>=<v>[,...]`` segments into ``faults``; return the rest of the path."""
    while path.startswith("/fault/"):
        segment, _, rest = path[len("/fault/") :].partition("/")
        for pair in unquote(segment).replace(";", ",").split(","):
            name, _, value = pair.partition("=")
            if name.strip() in FAULT_NAMES:
                faults.set(name.strip(), value)
        path = "/" + rest
    return path


def from_request(path: str, headers: dict[str, str]) -> tuple[str, Faults]:
    """Faults from the path prefix, then headers (headers win); returns the path without the prefix."""
    faults = Faults()
    path = split_fault_prefix(path, faults)
    for name in FAULT_NAMES:
        value = headers.get("x-mock-" + name)
        if value is not None:
            faults.set(name, value)
    return path, faults
