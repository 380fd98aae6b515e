"""One-way imports: the core (typed representation, codecs, pipeline) imports neither the ORM
nor the apps. The apps and the project layer (``gateway.wiring``, ``gateway.live_config``,
settings, URLs, ASGI) import the core, never the other way round.

Walks the AST of every module under the core packages, function-level imports included (a lazy
import is still a dependency)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CORE = ("gateway/urp", "gateway/protocols", "gateway/proxy")
APPS = ("keys", "providers", "transforms", "captures")
# Project-layer modules of the ``gateway`` package (Django models, admin, settings, wiring).
PROJECT = (
    "gateway.models",
    "gateway.admin",
    "gateway.api",
    "gateway.settings",
    "gateway.wiring",
    "gateway.live_config",
    "gateway.asgi",
    "gateway.urls",
    "gateway.signals",
    "gateway.configfile",
    "gateway.config_version",
    "gateway.serializers",
    "gateway.celery",
)


def _forbidden(name: str) -> str | None:
    top = name.split(".")[0]
    if top in APPS:
        return "an app"
    if name == "django.db" or name.startswith("django.db.") or name.endswith(".models") or name == "models":
        return "the ORM"
    if name.startswith("django.conf") or name == "django":
        return "Django settings (pass a config object instead)"
    if any(name == p or name.startswith(p + ".") for p in PROJECT):
        return "the project layer"
    return None


def _imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(), str(path))
    package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            out.append((node.lineno, module))
            # ``from django.db import models`` / ``from keys import auth`` name the same thing
            out.extend((node.lineno, f"{module}.{alias.name}") for alias in node.names)
    return out


def _core_modules() -> list[Path]:
    return sorted(p for pkg in CORE for p in (ROOT / pkg).rglob("*.py"))


def test_core_modules_found():
    assert len(_core_modules()) > 20


@pytest.mark.parametrize("path", _core_modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_core_imports_neither_orm_nor_apps(path: Path):
    bad = [f"line {line}: {name} ({why})" for line, name in _imports(path) if (why := _forbidden(name))]
    assert not bad, f"{path.relative_to(ROOT)} imports outside the core:\n" + "\n".join(bad)


def test_forbidden_names_are_caught():
    """The checker itself: each kind of forbidden import is recognised."""
    assert _forbidden("django.db")
    assert _forbidden("django.db.models")
    assert _forbidden("keys.auth")
    assert _forbidden("transforms.base")
    assert _forbidden("captures.sink")
    assert _forbidden("gateway.models")
    assert _forbidden("django.conf.settings")
    assert _forbidden("gateway.urp.events") is None
    assert _forbidden("gateway.errors") is None
