"""gateway.fernet_open (libcrypto via ctypes) against cryptography's Fernet: random keys and
plaintexts open to the same bytes, and every tampered or malformed token is refused by both."""

from __future__ import annotations

import base64
import random

import pytest
from cryptography.fernet import Fernet
from cryptography.fernet import InvalidToken as CryptographyInvalidToken

from gateway import crypto, fernet_open


def _reference(key: bytes, token: bytes) -> bytes | None:
    try:
        return Fernet(key).decrypt(token)
    except CryptographyInvalidToken:
        return None


def _ours(key: bytes, token: bytes) -> bytes | None:
    try:
        return fernet_open.decrypt(key, token)
    except fernet_open.InvalidToken:
        return None


def _tampered(rng: random.Random, token: bytes) -> bytes:
    """One of: a flipped bit anywhere in the decoded token, truncation, extension, a new version
    byte, a re-encoding with garbage characters, or random bytes."""
    data = bytearray(base64.urlsafe_b64decode(token))
    how = rng.randrange(6)
    if how == 0:
        data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    elif how == 1:
        del data[rng.randrange(len(data)) :]
    elif how == 2:
        data += rng.randbytes(rng.randrange(1, 40))
    elif how == 3:
        data[0] = rng.randrange(256) if rng.random() < 0.5 else 0x81
    elif how == 4:
        text = bytearray(token)
        text[rng.randrange(len(text))] = rng.choice(b"!*=.~ \x00")
        return bytes(text)
    else:
        return base64.urlsafe_b64encode(rng.randbytes(rng.randrange(0, 120)))
    return base64.urlsafe_b64encode(bytes(data))


def test_ctypes_libcrypto_is_used_here():
    assert fernet_open._libcrypto() is not None


def test_random_tokens_open_like_cryptography():
    rng = random.Random(20)
    for _ in range(400):
        key = Fernet.generate_key()
        plaintext = rng.randbytes(rng.choice([0, 1, 15, 16, 17, 31, 32, 33, rng.randrange(300)]))
        token = Fernet(key).encrypt(plaintext)
        assert fernet_open.decrypt(key, token) == plaintext
        assert _ours(Fernet.generate_key(), token) is None  # another key


def test_tampered_tokens_are_refused_like_cryptography():
    rng = random.Random(2020)
    refused = 0
    for _ in range(1500):
        key = Fernet.generate_key()
        token = Fernet(key).encrypt(rng.randbytes(rng.randrange(64)))
        bad = _tampered(rng, token)
        expected = _reference(key, bad)
        assert _ours(key, bad) == expected, bad
        refused += expected is None
    assert refused > 1400  # nearly all tampering is caught (a stray base64 character may be ignored)


def test_forged_tokens_with_a_valid_mac_are_refused_like_cryptography():
    """Tokens signed with the right key but with a bad padding, a short ciphertext or a
    ciphertext that is not whole blocks: the MAC passes, the decryption must still refuse."""
    import hashlib
    import hmac

    rng = random.Random(7)
    for _ in range(300):
        key = Fernet.generate_key()
        raw = base64.urlsafe_b64decode(key)
        body = b"\x80" + rng.randbytes(8) + rng.randbytes(16) + rng.randbytes(rng.choice([0, 5, 16, 32, 33]))
        token = base64.urlsafe_b64encode(body + hmac.new(raw[:16], body, hashlib.sha256).digest())
        assert _ours(key, token) == _reference(key, token)


def test_fallback_to_cryptography_when_libcrypto_is_missing(monkeypatch):
    monkeypatch.setattr(fernet_open, "_libcrypto", lambda: None)
    key = Fernet.generate_key()
    token = Fernet(key).encrypt(b"sk-upstream")
    assert fernet_open.decrypt(key, token) == b"sk-upstream"
    with pytest.raises(fernet_open.InvalidToken):
        fernet_open.decrypt(key, token[:-4] + b"AAAA")


def test_gateway_crypto_round_trip():
    assert crypto.decrypt(crypto.encrypt("sk-live-ünïcode")) == "sk-live-ünïcode"
    assert crypto.decrypt("not-a-token") == ""
    assert crypto.decrypt("") == "" and crypto.encrypt("") == ""
