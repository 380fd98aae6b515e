"""A NUL character in the path or query string of a Django page is a 400, never a 500
(PostgreSQL refuses NUL in text; forms and serializers already refuse it in what they validate)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db

URLS = [
    "/api/request-logs/?search=a%00b",
    "/api/request-logs/?model=a%00b",
    "/api/request-logs/?endpoint=a%00b",
    "/api/request-logs/?username=a%00b",
    "/api/request-logs/a%00b/",
    "/api/captures/?request_id=a%00b",
    "/api/captures/?model=a%00b",
    "/captures/?model=a%00b",
    "/captures/a%00b/",
    "/admin/requestlogs/requestlog/?q=a%00b",
    "/admin/keys/apikey/?q=%00",
]


@pytest.mark.parametrize("url", URLS)
def test_a_nul_character_is_a_clear_400(admin_client, url):
    reply = admin_client.get(url)
    assert reply.status_code == 400, reply.content[:200]
    assert b"NUL character" in reply.content
    if url.startswith("/api/"):
        assert reply.json()["code"] == "nul_character"


def test_an_escaped_percent_sign_is_not_a_nul(admin_client):
    assert admin_client.get("/api/request-logs/?search=%2500").status_code == 200
