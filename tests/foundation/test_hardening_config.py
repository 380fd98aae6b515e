"""Issue 13, the smaller findings on the control plane: credentials in a channel base_url are
refused on every write path, ``dumpconfig --include-secrets`` and the SQLite database are private
files, ``loadconfig`` refuses invalid UTF-8 and YAML alias bombs with a clear error, and the
production settings send security headers and rate-limit failed logins."""

from __future__ import annotations

import io
import os
import stat
from pathlib import Path

import pytest
import yaml
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.core.management.base import CommandError

from gateway import security
from gateway.configfile import ConfigError, load, parse_text
from providers.models import validate_base_url

pytestmark = pytest.mark.django_db

BOMB = "a: &a [x,x,x,x,x,x,x,x,x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{','.join(['*' + chr(97 + i)] * 9)}]\n" for i in range(8)
)


@pytest.mark.parametrize(
    "url",
    [
        "https://user:pw@api.example.com/v1",
        "https://tok@api.example.com",
        "https://api.example.com/v1?key=abc",
        "https://api.example.com/v1?api-key=x",
        "https://api.example.com/v1?access_token=x",
    ],
)
def test_credentials_in_base_url_are_refused(url):
    with pytest.raises(ValidationError):
        validate_base_url(url)
    doc = {
        "providers": [
            {
                "name": "p",
                "channels": [
                    {
                        "name": "c",
                        "protocol": "chat_completion",
                        "base_url": url,
                        "api_key": "k",
                        "models": ["m"],
                    }
                ],
            }
        ]
    }
    with pytest.raises(ConfigError) as info:
        load(doc)
    assert any("base_url" in e for e in info.value.errors)


def test_plain_base_urls_are_fine():
    for url in (
        "https://api.example.com/v1",
        "http://127.0.0.1:9100",
        "https://x.example.com/v1?api-version=2024",
    ):
        validate_base_url(url)


def test_dumpconfig_with_secrets_is_private_from_the_start(tmp_path: Path, monkeypatch):
    path = tmp_path / "secrets.yaml"
    modes = []
    real_open = os.open

    def spy(p, flags, mode=0o777, *a, **kw):
        fd = real_open(p, flags, mode, *a, **kw)
        if str(p) == str(path):
            modes.append(stat.S_IMODE(os.fstat(fd).st_mode))
        return fd

    monkeypatch.setattr(os, "open", spy)
    call_command("dumpconfig", "-o", str(path), "--include-secrets", stderr=io.StringIO())
    assert modes and modes[0] & 0o077 == 0  # never readable by others, not even briefly
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_sqlite_file_is_private(tmp_path: Path):
    from gateway.settings import _private_file

    db = tmp_path / "x.sqlite3"
    _private_file(db)
    assert stat.S_IMODE(db.stat().st_mode) == 0o600


def test_yaml_alias_bomb_and_bad_utf8_are_clear_errors(tmp_path: Path):
    assert len(BOMB) < 2000
    with pytest.raises(ConfigError) as info:
        parse_text(BOMB)
    assert "aliases" in info.value.errors[0]
    assert parse_text("a: &a [1, 2]\nb: *a\n") == {"a": [1, 2], "b": [1, 2]}  # ordinary anchors still work
    bad = tmp_path / "bad.yaml"
    bad.write_bytes(b"providers: []\nname: \xff\xfe\n")
    err = io.StringIO()
    with pytest.raises(CommandError):
        call_command("loadconfig", str(bad), stderr=err)
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(BOMB)
    with pytest.raises(CommandError):
        call_command("loadconfig", str(bomb), stderr=io.StringIO())
    assert yaml  # the loader is the safe one


def test_security_headers_and_login_rate_limit(client, settings):
    settings.LOGIN_RATE_LIMIT = 3
    security.reset()
    r = client.get("/admin/login/")
    assert "frame-ancestors 'none'" in r["Content-Security-Policy"]
    for _ in range(3):
        assert client.post("/admin/login/", {"username": "x", "password": "wrong"}).status_code == 200
    r = client.post("/admin/login/", {"username": "x", "password": "wrong"})
    assert r.status_code == 429 and r["Retry-After"]
    security.reset()
