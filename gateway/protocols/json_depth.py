"""A nesting limit for JSON values we parse and later write again.

``orjson.loads`` accepts documents nested up to 1024 levels, but ``orjson.dumps`` refuses
anything deeper than 254. A client body (or an upstream answer, or tool-call arguments text)
nested 255..1024 levels deep therefore decodes fine and then makes the encoder raise, which
would surface as a 500. Every parse boundary checks ``too_deep`` instead and refuses the value
with the caller's own error (400 for clients, a failed attempt for upstreams).

``MAX_DEPTH`` leaves the encoders room to wrap a passthrough value in their own envelopes.
"""

from __future__ import annotations

from typing import Any

import orjson

MAX_DEPTH = 128
_ORJSON_LIMIT = 254
_PAD = _ORJSON_LIMIT - MAX_DEPTH
# Counting brackets reads the text twice (``bytes.count`` per character, ~0.27 ms per MB each),
# which costs more than orjson's own walk (~0.2-0.3 ms per MB), and a large document has more
# than MAX_DEPTH brackets anyway: above this size the count is skipped (bench/AGENT_REQUESTS.md).
_COUNT_LIMIT = 16 * 1024


def too_deep(value: Any, raw: bytes | str | None = None) -> bool:
    """Whether ``value`` (parsed JSON; ``raw`` its text when at hand) nests deeper than
    ``MAX_DEPTH`` levels.

    Cheap on the hot path: a small value whose text has at most ``MAX_DEPTH`` brackets cannot be
    too deep and is not looked at; otherwise orjson itself measures (the value wrapped in
    ``_PAD`` lists fails to serialise exactly when it is too deep), at C speed."""
    if raw is not None and len(raw) <= 2 * MAX_DEPTH:  # every level opens and closes a bracket
        return False
    if raw is not None and len(raw) <= _COUNT_LIMIT:
        binary = isinstance(raw, bytes | bytearray)
        brackets = raw.count(b"[" if binary else "[") + raw.count(b"{" if binary else "{")
        if brackets <= MAX_DEPTH:
            return False
    if not isinstance(value, dict | list):
        return False
    wrapped: Any = value
    for _ in range(_PAD):
        wrapped = [wrapped]
    try:
        orjson.dumps(wrapped)
    except orjson.JSONEncodeError:
        return True
    return False


def loads_checked(raw: bytes | bytearray | memoryview) -> tuple[str, Any]:
    """``raw`` parsed as a JSON object and depth-checked: ``("ok", value)``, ``("invalid", None)``
    (not JSON), ``("notobject", None)`` (JSON, but not an object) or ``("deep", None)`` (an object
    nested too deep). Only a good object comes back, so nothing deep is ever pickled.

    One call for both so a large client body can be parsed on the image pool
    (``gateway.proxy.offload``): orjson holds the GIL for the whole parse (~2.6 ms per MB of
    base64 on the bench box), so a thread would not free the event loop; another process does."""
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return "invalid", None
    if not isinstance(value, dict):
        return "notobject", None
    if too_deep(value, raw):
        return "deep", None
    return "ok", value
