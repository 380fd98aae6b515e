"""Opening Fernet tokens without the ``cryptography`` package (issue 20: a worker's idle memory).

A serving worker decrypts the stored upstream channel keys (``gateway.crypto.decrypt``) and never
encrypts. Importing ``cryptography`` for that cost each worker ~9 MB of resident memory (its Rust
extension and OpenSSL bindings), although the interpreter has OpenSSL's libcrypto loaded already
(``hashlib``, ``ssl``). This module opens a token with that libcrypto through ``ctypes``:

- the token is ``0x80 | timestamp (8) | IV (16) | AES-128-CBC ciphertext | HMAC-SHA256 (32)``,
  base64url-encoded; the key's first 16 bytes sign, the last 16 encrypt (the Fernet spec);
- the HMAC is checked first, in constant time (``hmac.compare_digest``), and only then the
  ciphertext is decrypted (OpenSSL's ``EVP_Decrypt*``, which also checks the PKCS#7 padding);
- no TTL: the gateway never asks for one.

Every malformed or tampered token raises :class:`InvalidToken`, as ``Fernet.decrypt`` does
(tests/foundation/test_fernet_open.py compares the two on random and tampered tokens). When
libcrypto cannot be loaded, ``cryptography``'s Fernet does the work (same answers, more memory).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from functools import cache
from typing import Any

VERSION = 0x80
HEADER = 25  # version (1) + timestamp (8) + IV (16)
MAC = 32
BLOCK = 16
LIBCRYPTO_NAMES = ("libcrypto.so.3", "libcrypto.so.1.1", "libcrypto.so")


class InvalidToken(Exception):
    """The token is malformed, was not made with this key, or was altered."""


def _loaded_libcrypto() -> str | None:
    """The libcrypto the interpreter already mapped (``_hashlib`` links it): the same library,
    no second copy in memory."""
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.split()[-1]
                if "/libcrypto" in path:
                    return path
    except OSError:
        pass
    return None


@cache
def _libcrypto() -> Any | None:
    """OpenSSL's libcrypto with the EVP decryption functions typed, or None when it cannot be loaded."""
    try:
        import ctypes
    except ImportError:  # pragma: no cover - an interpreter without ctypes
        return None
    for name in (_loaded_libcrypto(), *LIBCRYPTO_NAMES):
        if not name:
            continue
        try:
            lib = ctypes.CDLL(name)
            ptr, buf, intp = ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_int)
            lib.EVP_CIPHER_CTX_new.restype = ptr
            lib.EVP_CIPHER_CTX_new.argtypes = []
            lib.EVP_CIPHER_CTX_free.restype = None
            lib.EVP_CIPHER_CTX_free.argtypes = [ptr]
            lib.EVP_aes_128_cbc.restype = ptr
            lib.EVP_aes_128_cbc.argtypes = []
            lib.EVP_DecryptInit_ex.restype = ctypes.c_int
            lib.EVP_DecryptInit_ex.argtypes = [ptr, ptr, ptr, buf, buf]
            lib.EVP_DecryptUpdate.restype = ctypes.c_int
            lib.EVP_DecryptUpdate.argtypes = [ptr, ctypes.c_void_p, intp, buf, ctypes.c_int]
            lib.EVP_DecryptFinal_ex.restype = ctypes.c_int
            lib.EVP_DecryptFinal_ex.argtypes = [ptr, ctypes.c_void_p, intp]
        except (OSError, AttributeError):
            continue
        return lib
    return None


def _aes_cbc_decrypt(lib: Any, key: bytes, iv: bytes, ciphertext: bytes) -> bytes:
    """AES-128-CBC with PKCS#7 padding removed; InvalidToken on a bad length or padding."""
    import ctypes

    if len(iv) != BLOCK or not ciphertext or len(ciphertext) % BLOCK:
        raise InvalidToken
    ctx = lib.EVP_CIPHER_CTX_new()
    if not ctx:
        raise MemoryError("EVP_CIPHER_CTX_new failed")
    try:
        out = ctypes.create_string_buffer(len(ciphertext) + BLOCK)
        used, last = ctypes.c_int(0), ctypes.c_int(0)
        if lib.EVP_DecryptInit_ex(ctx, lib.EVP_aes_128_cbc(), None, key, iv) != 1:
            raise InvalidToken
        if lib.EVP_DecryptUpdate(ctx, out, ctypes.byref(used), ciphertext, len(ciphertext)) != 1:
            raise InvalidToken
        tail = ctypes.byref(out, used.value)
        if lib.EVP_DecryptFinal_ex(ctx, tail, ctypes.byref(last)) != 1:  # bad padding
            raise InvalidToken
        return out.raw[: used.value + last.value]
    finally:
        lib.EVP_CIPHER_CTX_free(ctx)


def _with_cryptography(key: bytes, token: bytes) -> bytes:
    from cryptography.fernet import Fernet
    from cryptography.fernet import InvalidToken as CryptographyInvalidToken

    try:
        return Fernet(key).decrypt(token)
    except (CryptographyInvalidToken, ValueError) as exc:
        raise InvalidToken from exc


def decrypt(key: bytes, token: bytes) -> bytes:
    """The plaintext of Fernet ``token`` under ``key`` (the base64url 32-byte Fernet key), as
    ``Fernet(key).decrypt(token)`` gives it; raises InvalidToken where that raises."""
    raw_key = base64.urlsafe_b64decode(key)
    if len(raw_key) != 32:
        raise ValueError("Fernet key must be 32 url-safe base64-encoded bytes.")
    lib = _libcrypto()
    if lib is None:
        return _with_cryptography(key, token)
    try:
        data = base64.urlsafe_b64decode(token)
    except (TypeError, binascii.Error):
        raise InvalidToken from None
    if len(data) < 9 + MAC or data[0] != VERSION:
        raise InvalidToken
    expected = hmac.new(raw_key[:16], data[:-MAC], hashlib.sha256).digest()
    if not hmac.compare_digest(expected, data[-MAC:]):
        raise InvalidToken
    return _aes_cbc_decrypt(lib, raw_key[16:], data[9:HEADER], data[HEADER:-MAC])
