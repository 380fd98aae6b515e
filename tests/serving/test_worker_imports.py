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
