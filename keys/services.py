"""Writing client API keys: the one path the REST serializer, the admin and ``loadconfig`` share.

A key's secret is never stored, only its keyed hash and a short prefix. A new key gets the
secret it is given, else the hash of a dump (``key_hash``), else a generated secret that the
caller shows once.
"""

from __future__ import annotations

from typing import Any

from gateway.crypto import hash_api_key
from gateway.writes import ErrorTree, Note, assign, editable_fields, save_checked
from keys.models import PREFIX_LEN, ApiKey

API_KEY_FIELDS = editable_fields(ApiKey)
MIN_SECRET_LEN = 12
SECRET_TAKEN = "this secret already belongs to another API key"
HASH_TAKEN = "this hash already belongs to another API key"
# Model fields reported under the name the front ends use for them.
ERROR_ALIASES = {"key_hash": "key", "prefix": "key"}


def secret_taken(secret: str, *, exclude_pk: int | None = None) -> bool:
    return ApiKey.objects.filter(key_hash=hash_api_key(secret)).exclude(pk=exclude_pk).exists()


def issue_secret(key: ApiKey, secret: str | None = None) -> str:
    """Give ``key`` a new secret (generated unless given) and return it, to be shown once."""
    return key.set_secret(secret)


def write_api_key(
    key: ApiKey,
    data: dict[str, Any],
    *,
    secret: str | None = None,
    key_hash: str | None = None,
    key_prefix: str | None = None,
    reset_missing: bool = False,
    note: Note | None = None,
) -> tuple[ErrorTree, str | None]:
    """Apply ``data`` (model fields; ``owner`` a user or None) and the secret; save when valid.
    Returns the errors and, for a new key given no secret, the generated one."""
    assign(key, data, API_KEY_FIELDS, reset_missing=reset_missing)
    issued = None
    if secret:
        if key.key_hash != hash_api_key(secret):
            if secret_taken(secret, exclude_pk=key.pk):
                return {"key": [SECRET_TAKEN]}, None
            key.set_secret(secret)
    elif key_hash:
        if key.key_hash != key_hash:
            if ApiKey.objects.filter(key_hash=key_hash).exclude(pk=key.pk).exists():
                return {"key_hash": [HASH_TAKEN]}, None
            key.key_hash = key_hash
            key.prefix = (key_prefix or "")[:PREFIX_LEN]
    elif key.pk is None:
        issued = issue_secret(key)
    errors = save_checked(key, aliases=ERROR_ALIASES, note=note, kind="api_keys", label=key.name)
    return errors, (None if errors else issued)
