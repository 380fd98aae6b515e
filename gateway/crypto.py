"""Secrets at rest: upstream channel keys are encrypted, client API keys are keyed hashes.

Both derive from ``GATEWAY_SECRETS_KEY`` when set, else from ``SECRET_KEY``; rotate with care:
changing it makes stored channel keys unreadable and client keys unverifiable.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from functools import cache

from cryptography.fernet import Fernet, InvalidToken
from django.conf import settings

from gateway.conf import gateway_settings


def _master() -> bytes:
    return (gateway_settings.SECRETS_KEY or settings.SECRET_KEY).encode()


@cache
def _fernet() -> Fernet:
    key = hashlib.sha256(b"gateway-channel-keys:" + _master()).digest()
    return Fernet(base64.urlsafe_b64encode(key))


@cache
def _hash_key() -> bytes:
    return hashlib.sha256(b"gateway-api-key-hash:" + _master()).digest()


def encrypt(plaintext: str) -> str:
    return _fernet().encrypt(plaintext.encode()).decode() if plaintext else ""


def decrypt(token: str) -> str:
    if not token:
        return ""
    try:
        return _fernet().decrypt(token.encode()).decode()
    except InvalidToken:
        return ""


def hash_api_key(secret: str) -> str:
    return hmac.new(_hash_key(), secret.encode(), hashlib.sha256).hexdigest()
