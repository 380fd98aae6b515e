"""Defensive masking of secret-looking body fields before a capture is stored.

Captures hold bodies only, never headers, so the client's key and the channel keys are out by
construction. Clients still sometimes put credentials in a body (``api_key`` in an OpenAI-ish
payload, a ``password`` in tool arguments given as objects): any dict key whose normalized name
(lower case, ``-`` and ``_`` removed) is in :data:`SECRET_KEYS` has its value replaced by
:data:`MASK`.

One deliberate exception: the bare ``token`` key inside a log-probability entry (a dict that
also has ``logprob``) is the sampled text, not a credential, and is kept — masking it would make
captured logprobs useless.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

MASK = "***"

SECRET_KEYS = frozenset(
    {
        "apikey",
        "xapikey",
        "xgoogapikey",
        "authorization",
        "proxyauthorization",
        "password",
        "passwd",
        "secret",
        "clientsecret",
        "secretkey",
        "secretaccesskey",
        "awssecretaccesskey",
        "token",
        "accesstoken",
        "refreshtoken",
        "idtoken",
        "sessiontoken",
        "authtoken",
        "bearertoken",
        "privatekey",
        "apisecret",
    }
)


@lru_cache(maxsize=4096)  # the same few dozen keys come back in every body
def _is_secret(key: str) -> bool:
    return key.lower().replace("_", "").replace("-", "") in SECRET_KEYS


_KEY_AT = re.compile(b'"(?:' + b"|".join(sorted(k.encode() for k in SECRET_KEYS)) + b')":')
# How every folded secret key ends, with its closing quote and colon: a substring search each
# (C, about a byte per instruction) rules most bodies out before the regex, which tries its 20
# names at every quote and was an eighth of the capture writer's work (issue 20).
_ENDINGS = (b'key":', b'ization":', b'word":', b'swd":', b'secret":', b'token":')
assert all(any((k + '":').encode().endswith(e) for e in _ENDINGS) for k in SECRET_KEYS)


_ASCII_LOWER = bytes.maketrans(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ", b"abcdefghijklmnopqrstuvwxyz")


def may_hold_secret(data: bytes) -> bool:
    """Whether ``data`` (compact JSON as orjson writes it) may have a key :func:`mask_secrets`
    masks; False means the walk would change nothing and can be skipped. A key is written as
    ``"name":`` with its characters as they are (orjson escapes only quotes, backslashes and
    control characters), so once case and ``-``/``_`` are folded away a secret key reads as one
    of :data:`SECRET_KEYS` between quotes. Non-ASCII text is always walked (``str.lower`` folds
    some non-ASCII letters to ASCII ones)."""
    if not data.isascii():
        return True
    folded = data.translate(_ASCII_LOWER, b"_-")  # (lower and fold in one pass: ASCII only here)
    for ending in _ENDINGS:
        if folded.find(ending) >= 0:
            return _KEY_AT.search(folded) is not None
    return False


def mask_secrets(value: Any) -> Any:
    """Mask secret-looking fields in place (the record is ours once submitted) and return
    ``value``. Strings, numbers and lists of scalars cost one type check each."""
    if isinstance(value, dict):
        for key in value:
            item = value[key]
            if isinstance(key, str) and _is_secret(key):
                if item is None or item == "":
                    continue
                if key == "token" and "logprob" in value:
                    continue
                value[key] = MASK
            elif isinstance(item, dict | list):
                mask_secrets(item)
    elif isinstance(value, list):
        for item in value:
            if isinstance(item, dict | list):
                mask_secrets(item)
    return value
