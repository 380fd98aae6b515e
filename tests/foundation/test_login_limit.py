"""Issue 13: the login rate limit is one count shared by every worker and instance (Redis with
REDIS_URL, the database without), so two gateway processes together admit exactly
``LOGIN_RATE_LIMIT`` failed logins per window and address; while the shared store is down each
process counts for itself, and says so in the log."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from gateway import security
from gateway.login_limit import DbLimiter, RedisLimiter

ROOT = Path(__file__).resolve().parents[2]
REDIS_URL = os.environ.get("REDIS_URL_FOR_TESTS", "redis://127.0.0.1:6379/15")
WRONG = {"username": "x", "password": "wrong"}

# A second gateway process: Django on the same database (and Redis), posting failed logins.
_WORKER = """
import json, sys, django
from django.conf import settings
settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # speed only
django.setup()
from django.test import Client
client = Client(REMOTE_ADDR="198.51.100.7")
print(json.dumps([client.post("/admin/login/", {"username": "x", "password": "wrong"}).status_code
                  for _ in range(int(sys.argv[1]))]))
"""

# Two bare limiters in two processes racing for the same key from a common start time.
_RACER = """
import sys, time
from gateway.login_limit import DbLimiter, RedisLimiter
limiter = RedisLimiter.from_url(sys.argv[1])
time.sleep(max(0.0, float(sys.argv[2]) - time.time()))
print(sum(limiter.acquire("ip:race", 7, 60)[0] for _ in range(25)))
"""


def _redis_or_skip() -> RedisLimiter:
    limiter = RedisLimiter.from_url(REDIS_URL)
    try:
        limiter.client.ping()
    except Exception:
        pytest.skip("no Redis at REDIS_URL_FOR_TESTS")
    return limiter


def _other_worker(attempts: int, redis_url: str = "") -> list[int]:
    from tests.servers import database_url

    env = {k: v for k, v in os.environ.items() if k not in ("GATEWAY_TEST_DB", "REDIS_URL")}
    env.update(
        DJANGO_SETTINGS_MODULE="gateway.settings",
        DATABASE_URL=database_url(),
        REDIS_URL=redis_url,
        DEBUG="0",
        GATEWAY_LOGIN_RATE_LIMIT="3",
        GATEWAY_LOGIN_RATE_WINDOW="300",
    )
    out = subprocess.run(
        [sys.executable, "-c", _WORKER, str(attempts)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.fixture
def login_limit(settings):
    settings.LOGIN_RATE_LIMIT = 3
    settings.LOGIN_RATE_WINDOW = 300
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # speed only
    security.reset()
    yield settings
    security.reset()


@pytest.mark.e2e  # starts a second Django process: seconds, not the unit tier's milliseconds
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("store", ["database", "redis"])
def test_two_processes_together_admit_the_limit(client, login_limit, store):
    redis_url = ""
    if store == "redis":
        _redis_or_skip()
        redis_url = login_limit.REDIS_URL = REDIS_URL
        security.reset()
    assert _other_worker(2, redis_url) == [200, 200]  # another process: two failed logins
    assert client.post("/admin/login/", WRONG, REMOTE_ADDR="198.51.100.7").status_code == 200
    r = client.post("/admin/login/", WRONG, REMOTE_ADDR="198.51.100.7")
    assert r.status_code == 429 and 0 < int(r["Retry-After"]) <= 300
    assert _other_worker(1, redis_url) == [429]  # and the other process sees this one's
    assert client.post("/admin/login/", WRONG, REMOTE_ADDR="198.51.100.8").status_code == 200


@pytest.mark.e2e
def test_racing_processes_share_exactly_the_limit_in_redis():
    limiter = _redis_or_skip()
    limiter.clear("ip:race")
    start = str(time.time() + 1.5)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _RACER, REDIS_URL, start],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    admitted = [int(p.communicate(timeout=60)[0]) for p in procs]
    assert sum(admitted) == 7
    assert limiter.acquire("ip:race", 7, 60)[0] is False
    limiter.clear("ip:race")


@pytest.mark.django_db(transaction=True)
def test_racing_threads_share_exactly_the_limit_in_the_database():
    from django.db import connection

    limiters = [DbLimiter(), DbLimiter()]  # as two processes: separate connections, one table
    admitted: list[bool] = []
    barrier = threading.Barrier(6)

    def race(limiter: DbLimiter) -> None:
        try:
            barrier.wait()
            admitted.extend(limiter.acquire("ip:race", 7, 60)[0] for _ in range(5))
        finally:
            connection.close()

    threads = [threading.Thread(target=race, args=(limiters[i % 2],)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(admitted) == 30 and sum(admitted) == 7


@pytest.mark.django_db
def test_success_clears_and_unchecked_posts_give_their_slot_back(client, login_limit, django_user_model):
    django_user_model.objects.create_superuser("boss", "b@example.com", "right-password-1")
    for _ in range(2):
        assert client.post("/admin/login/", WRONG).status_code == 200
    for _ in range(5):  # no password checked (empty form): not an attempt
        assert client.post("/admin/login/", {}).status_code == 200
    assert (
        client.post("/admin/login/", {"username": "boss", "password": "right-password-1"}).status_code == 302
    )
    client.logout()
    for _ in range(3):  # the success cleared the count
        assert client.post("/admin/login/", WRONG).status_code == 200
    assert client.post("/admin/login/", WRONG).status_code == 429


@pytest.mark.django_db
def test_behind_a_trusted_proxy_each_forwarded_client_has_its_own_count(client, login_limit):
    """Behind a proxy every login comes from the proxy's address: the limit counts the client its
    X-Forwarded-For names when the proxy is trusted (GATEWAY_TRUSTED_PROXY_CIDRS), as API keys'
    allow-lists do, so one client's failures do not lock every other client out."""
    proxy = {"REMOTE_ADDR": "127.0.0.1"}
    for _ in range(3):
        assert (
            client.post("/admin/login/", WRONG, HTTP_X_FORWARDED_FOR="203.0.113.1", **proxy).status_code
            == 200
        )
    assert client.post("/admin/login/", WRONG, HTTP_X_FORWARDED_FOR="203.0.113.1", **proxy).status_code == 429
    assert client.post("/admin/login/", WRONG, HTTP_X_FORWARDED_FOR="203.0.113.2", **proxy).status_code == 200
    # from an untrusted peer the header names nobody: the peer itself is counted
    for claimed in ("203.0.113.3", "203.0.113.4", "203.0.113.5"):
        assert (
            client.post(
                "/admin/login/", WRONG, REMOTE_ADDR="198.51.100.9", HTTP_X_FORWARDED_FOR=claimed
            ).status_code
            == 200
        )
    assert client.post("/admin/login/", WRONG, REMOTE_ADDR="198.51.100.9").status_code == 429


@pytest.mark.django_db
def test_redis_down_falls_back_to_a_per_process_count_and_logs(client, login_limit, caplog):
    login_limit.REDIS_URL = "redis://127.0.0.1:1/0"  # nothing listens there
    with caplog.at_level(logging.WARNING, logger="gateway.security"):
        for _ in range(3):
            assert client.post("/admin/login/", WRONG).status_code == 200
        assert client.post("/admin/login/", WRONG).status_code == 429
    assert sum("counting per process" in r.getMessage() for r in caplog.records) == 1
    security._store_health(False)
