"""Text from outside (a client's model name, an upstream's error message) as the traffic writers
store it: PostgreSQL refuses a NUL character in text and in JSON strings, and the writers insert
with raw SQL, past the form validators that keep NUL out of configuration. One such value failed
its row (in a batch, the whole batch). NUL becomes U+FFFD on every backend, so SQLite and
PostgreSQL store the same text."""

from __future__ import annotations

NUL = "\x00"
REPLACEMENT = "\ufffd"


def storable(text: str) -> str:
    """``text`` without NUL characters (the same object when it has none: the common case costs
    one search)."""
    return text.replace(NUL, REPLACEMENT) if NUL in text else text
