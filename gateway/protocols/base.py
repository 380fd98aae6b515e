"""Shared shapes and small wire helpers for codecs."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import orjson

from gateway.urp.nodes import INTERNAL_PREFIX

from .json_depth import too_deep

# Token counters beyond this are garbage (2**53 - 1, the largest integer a JavaScript client can
# hold); accepting them would let sums such as prompt + completion overflow the 64-bit integers
# orjson can write.
MAX_TOKEN_COUNT = 2**53 - 1


def token_count(value: Any) -> int | None:
    """An upstream token counter when it is a plausible one (a non-negative integer that is not a
    bool and not absurdly large), else None."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_TOKEN_COUNT:
        return value
    return None


def new_id(prefix: str, nbytes: int = 12) -> str:
    """A fresh random wire id: ``prefix`` + ``2 * nbytes`` hex characters (``msg_3f9c...``, 24
    hex by default, like OpenAI's and Anthropic's)."""
    return prefix + os.urandom(nbytes).hex()


def json_text(value: Any) -> str:
    """``value`` as JSON text; a string is taken to be JSON text already (tool arguments, custom
    tool input, encrypted content and SSE payloads arrive either way)."""
    return value if isinstance(value, str) else orjson.dumps(value).decode()


def without_internal(value: Any) -> Any:
    """A copy of an opaque JSON value with every internal ``_gw_`` key removed at any depth (no
    spoofed markers on the way in, no leakage on the way out)."""
    if isinstance(value, dict):
        return {
            k: without_internal(v)
            for k, v in value.items()
            if not (isinstance(k, str) and k.startswith(INTERNAL_PREFIX))
        }
    if isinstance(value, list):
        return [without_internal(v) for v in value]
    return value


def _has_internal(value: Any) -> bool:
    if isinstance(value, dict):
        for k, v in value.items():
            if (isinstance(k, str) and k.startswith(INTERNAL_PREFIX)) or (
                isinstance(v, dict | list) and _has_internal(v)
            ):
                return True
        return False
    if isinstance(value, list):
        return any(isinstance(v, dict | list) and _has_internal(v) for v in value)
    return False


def scrub(value: Any) -> Any:
    """Opaque JSON with every ``_gw_*`` key removed at any depth (anti-spoofing on the way in, no
    leakage on the way out). Returns the very same object when there is nothing to remove, so
    the common case costs one read-only walk and no copy."""
    return without_internal(value) if _has_internal(value) else value


def put_extra(target: dict[str, Any], extra: dict[str, Any] | None) -> dict[str, Any]:
    """Merge preserved unknown fields into a wire object the encoder built: they fill absent keys
    only (encoder-owned fields win) and internal markers never go out. Returns ``target``."""
    if extra:
        for k, v in extra.items():
            if k not in target and not k.startswith(INTERNAL_PREFIX):
                target[k] = v
    return target


def arguments_object(arguments: str) -> dict[str, Any]:
    """Tool-call arguments text -> the JSON object Anthropic's ``input`` and Gemini's ``args``
    require. Text that is not a JSON object (or is too deep to be written back out) is kept as
    ``{"_raw": text}`` rather than lost or turned into an error."""
    if not arguments or not arguments.strip():
        return {}
    try:
        value = orjson.loads(arguments)
    except orjson.JSONDecodeError:
        return {"_raw": arguments}
    return value if isinstance(value, dict) and not too_deep(value, arguments) else {"_raw": arguments}


def split_data_url(url: str) -> tuple[str, str] | None:
    """``data:<mime>;base64,<data>`` -> (mime, data); None for anything else (a plain URL, a
    data URL that is not base64). The mime may be empty."""
    if not url.startswith("data:"):
        return None
    comma = url.find(",", 5)  # the payload is sliced once (``url[5:].partition`` copied it twice)
    if comma < 0 or not url.endswith(";base64", 5, comma):
        return None
    return url[5 : comma - 7], url[comma + 1 :]


@dataclass(slots=True)
class EncodeContext:
    """What an encoder needs to know beyond the URP object.

    ``model``: the model name to write (the upstream model for requests, the client's logical
    model for responses). ``source_protocol``: the protocol the object was decoded from; when it
    differs from the encoder's protocol the hop is cross-family. ``strip_nested``: drop nested
    passthrough (node extras, control nodes) on cross-family hops. ``include_usage``: Chat
    stream clients that asked for a usage chunk. ``options``: protocol-specific knobs.
    """

    model: str
    source_protocol: str | None = None
    strip_nested: bool = True
    include_usage: bool = True
    options: dict[str, Any] = field(default_factory=dict)
