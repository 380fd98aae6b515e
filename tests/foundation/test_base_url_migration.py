"""Issue 13: channels saved before credentials in a base_url were refused are cleaned by data
migration providers 0006: the ``user:password@`` part leaves the URL, its secret becomes the
channel's encrypted key unless the channel already has one, each change is logged (never the
secret), and a key in the query string is reported but left in place."""

from __future__ import annotations

import logging

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from gateway import crypto

BEFORE = [("providers", "0005_breaker_thresholds")]
AFTER = [("providers", "0006_base_url_credentials")]


def _migrate(targets):
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    executor.loader.build_graph()
    return executor.loader.project_state(targets).apps


@pytest.mark.django_db(transaction=True)
def test_migration_moves_url_credentials_into_the_key(caplog):
    apps = _migrate(BEFORE)
    provider = apps.get_model("providers", "Provider").objects.create(name="old")
    Channel = apps.get_model("providers", "Channel")

    def channel(name: str, url: str, key: str = ""):
        return Channel.objects.create(
            provider=provider,
            name=name,
            protocol="chat_completion",
            base_url=url,
            api_key_encrypted=crypto.encrypt(key),
        ).pk

    moved = channel("moved", "https://:sk-sec%2Fret@api.example.com:8443/v1?x=1")
    user_only = channel("user-only", "https://tok123@api.example.com")
    kept = channel("kept", "https://user:url-pw@api.example.com/v1", key="sk-existing")
    clean = channel("clean", "https://api.example.com/v1/@not-userinfo")
    query = channel("query", "https://api.example.com/v1?key=q-secret")  # reported, left as it is
    try:
        with caplog.at_level(logging.WARNING, logger="gateway.security"):
            apps = _migrate(AFTER)
        rows = {c.pk: c for c in apps.get_model("providers", "Channel").objects.all()}
        assert rows[moved].base_url == "https://api.example.com:8443/v1?x=1"
        assert crypto.decrypt(rows[moved].api_key_encrypted) == "sk-sec/ret"
        assert rows[user_only].base_url == "https://api.example.com"
        assert crypto.decrypt(rows[user_only].api_key_encrypted) == "tok123"
        assert rows[kept].base_url == "https://api.example.com/v1"
        assert crypto.decrypt(rows[kept].api_key_encrypted) == "sk-existing"
        assert rows[clean].base_url == "https://api.example.com/v1/@not-userinfo"
        assert rows[query].base_url == "https://api.example.com/v1?key=q-secret"
        log = caplog.text
        assert f"query (id {query}): its base_url carries a key or token" in log
        assert log.count("removed credentials from its base_url") == 3
        assert "kept its existing API key" in log and "moved them into its encrypted API key" in log
        assert "sk-sec" not in log and "url-pw" not in log and "tok123" not in log and "q-secret" not in log
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
