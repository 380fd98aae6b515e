"""The built wheel carries what an installed gateway needs beyond Python files: app templates and
static files inside their packages, the project-wide templates under share/monogate/templates."""

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.e2e  # builds a wheel (seconds, and setuptools from the package index)


def _source_files(pattern: str) -> set[str]:
    return {p.relative_to(ROOT).as_posix() for p in ROOT.glob(pattern) if p.is_file()}


def test_wheel_contains_templates_and_static_files(tmp_path):
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(ROOT)],
        check=True,
        capture_output=True,
    )
    wheel = next(tmp_path.glob("monogate-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    app_files = set()
    for app in ("gateway", "providers", "keys", "transforms", "captures", "requestlogs"):
        app_files |= _source_files(f"{app}/templates/**/*") | _source_files(f"{app}/static/**/*")
    assert app_files and app_files <= names, sorted(app_files - names)
    project = {f"monogate-0.1.0.data/data/share/monogate/{p}" for p in _source_files("templates/**/*")}
    assert project and project <= names, sorted(project - names)
    assert not any(n.startswith("tests/") for n in names)
