"""Issue 20: a worker's idle memory. What the proxy never uses is not imported when a worker
loads the application: jsonschema (~2 MB of RSS per worker) is imported only when a transform
configuration is validated or the transform checks run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_loading_the_application_does_not_import_jsonschema(tmp_path):
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "gateway.settings",
        "GATEWAY_SKIP_START_CHECKS": "1",  # as gateway.launch starts its workers
        "GATEWAY_DATA_DIR": str(tmp_path),
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "SECRET_KEY": "x" * 50,
    }
    code = "import sys, gateway.asgi; print('jsonschema' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "False"


# A worker exactly as gateway.launch starts one (its argv and environment), on a database with
# the demo configuration (so the snapshot decrypts channel keys); a thread in that process waits
# until it answers /v1/models, reads sys.modules, fetches /admin/login/, and stops it.
WORKER_PROBE = r"""
import json, os, signal, socket, sys, threading, time, urllib.request

port = int(sys.argv[1])
IDLE_ABSENT = (
    "cryptography", "redis", "gateway.admin", "providers.admin", "django.contrib.auth.admin",
    "rest_framework.authtoken.admin", "gateway.urls", "django.core.handlers.asgi", "channels.auth",
)

def loaded():
    return {name: name in sys.modules for name in IDLE_ABSENT}

def get(path, headers=None):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers=headers or {})
    with urllib.request.urlopen(req, timeout=30) as resp:
        return resp.status, resp.read()

def probe():
    out = {}
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        # the first answer comes once lifespan start-up is over (the snapshot loaded, keys decrypted)
        out["models"] = get("/v1/models", {"Authorization": "Bearer sk-demo-0001"})[0]
        time.sleep(0.5)
        out["idle"] = loaded()
        out["keys_opened_with_ctypes"] = "ctypes" in sys.modules
        status, body = get("/admin/login/")
        out["admin"] = [status, b"csrfmiddlewaretoken" in body, b"Monogate" in body]
        out["admin_loaded"] = "gateway.admin" in sys.modules and "providers.admin" in sys.modules
    except Exception as exc:
        out["error"] = repr(exc)
    print("PROBE " + json.dumps(out), flush=True)
    os.kill(os.getpid(), signal.SIGTERM)

threading.Thread(target=probe, daemon=True).start()
from gateway.launch import main
main(["--worker", "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"])
"""


def test_an_idle_worker_has_not_imported_cryptography_redis_or_the_admin(tmp_path):
    """Issue 20: channel keys are opened with libcrypto (gateway.fernet_open), redis-py waits for
    a Redis limiter, the admin's registrations and Django's handler wait for the first request
    Django serves; that request still gets the admin (its login page)."""
    import json
    import socket

    from gateway.launch import CHECKS_ENV, DEFER_ADMIN_ENV

    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "gateway.settings",
        "GATEWAY_DATA_DIR": str(tmp_path),
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "SECRET_KEY": "y" * 50,
        "MOCK_PORT": "9",
        CHECKS_ENV: "1",
        DEFER_ADMIN_ENV: "1",
    }
    env.pop("REDIS_URL", None)
    for args in (["migrate", "--noinput", "-v", "0"], ["loadconfig", "config/demo.yaml"]):
        done = subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert done.returncode == 0, done.stderr[-2000:]
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    out = subprocess.run(
        [sys.executable, "-c", WORKER_PROBE, str(port)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    lines = [line for line in out.stdout.splitlines() if line.startswith("PROBE ")]
    assert lines, (out.stdout[-2000:], out.stderr[-3000:])
    probe = json.loads(lines[-1][len("PROBE ") :])
    assert "error" not in probe, (probe, out.stderr[-3000:])
    assert probe["idle"] == dict.fromkeys(probe["idle"], False)
    assert probe["keys_opened_with_ctypes"]
    assert probe["models"] == 200
    assert probe["admin"] == [200, True, True]
    assert probe["admin_loaded"]
