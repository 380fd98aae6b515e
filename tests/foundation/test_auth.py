"""Key authentication helpers used by the proxy."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from gateway.crypto import hash_api_key
from keys.auth import authenticate, extract_secret


@dataclass
class Key:
    name: str
    enabled: bool = True
    expires_at: float | None = None


NOW = 1_800_000_000.0


@pytest.fixture
def keys() -> dict[str, Key]:
    return {
        hash_api_key("sk-good-000001"): Key("good"),
        hash_api_key("sk-off-0000001"): Key("off", enabled=False),
        hash_api_key("sk-old-0000001"): Key("old", expires_at=NOW - 1),
        hash_api_key("sk-now-0000001"): Key("now", expires_at=NOW),
        hash_api_key("sk-later-00001"): Key("later", expires_at=NOW + 60),
    }


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"authorization": "Bearer sk-a"}, "sk-a"),
        ({"authorization": "bearer  sk-a "}, "sk-a"),
        ({"x-api-key": "sk-b"}, "sk-b"),
        ({"x-api-key": " sk-b "}, "sk-b"),
        ({"authorization": "Bearer sk-a", "x-api-key": "sk-b"}, "sk-a"),
        ({"authorization": "Basic abc", "x-api-key": "sk-b"}, None),
        ({"authorization": "Bearer "}, None),
        ({"authorization": "sk-a"}, None),
        ({"x-api-key": ""}, None),
        ({}, None),
        ({"x-goog-api-key": "sk-c"}, None),
    ],
)
def test_extract_secret(headers, expected):
    assert extract_secret(headers) == expected


def test_authenticate_accepts_good_keys(keys):
    assert authenticate("sk-good-000001", keys, NOW).name == "good"
    assert authenticate("sk-later-00001", keys, NOW).name == "later"


@pytest.mark.parametrize(
    "secret",
    [
        "sk-off-0000001",
        "sk-old-0000001",
        "sk-now-0000001",
        "sk-unknown-001",
        "",
        None,
        "sk-" + "x" * 600,
        "SK-GOOD-000001",
    ],
)
def test_authenticate_refuses_identically(keys, secret):
    assert authenticate(secret, keys, NOW) is None


def test_bearer_and_x_api_key_end_to_end(keys):
    for headers in ({"authorization": "Bearer sk-good-000001"}, {"x-api-key": "sk-good-000001"}):
        assert authenticate(extract_secret(headers), keys, NOW).name == "good"


@pytest.mark.parametrize("secret", ["sk-x", "", "sk-" + "é" * 40, "k" * 200])
def test_key_hash_is_hmac_sha256_under_the_hash_key(secret):
    """The stored hashes stay what ``hmac.new`` gives (keys hashed before the pads were cached
    still authenticate), for secrets shorter and longer than a SHA-256 block."""
    import hashlib
    import hmac

    from gateway.crypto import _hash_key

    expected = hmac.new(_hash_key(), secret.encode(), hashlib.sha256).hexdigest()
    assert hash_api_key(secret) == expected
    assert hash_api_key(secret) == expected  # the cached pads are copied, not consumed
