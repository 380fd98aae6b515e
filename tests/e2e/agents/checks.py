"""Assertions shared by the agent tests: what the upstream received, and losslessness.

Losslessness is checked against the CLI itself: the same task is first run with the CLI pointed
straight at the scripted upstream, then through the gateway to a same-protocol upstream, in the
same working folder; the two recorded bodies must be equal once the values that legitimately
differ between two runs (session ids, client-generated item ids, the redirected model) are
masked.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

MASK = "<volatile>"


def tool_names(body: dict[str, Any]) -> list[str]:
    return [(t.get("function") or {}).get("name") or t.get("name") or "" for t in body.get("tools") or []]


def agent_turns(recorded: list[dict[str, Any]], path: str, tool: str) -> list[dict[str, Any]]:
    """The recorded requests on ``path`` that offered ``tool`` (the agent loop's turns), in order."""
    return [
        rec
        for rec in recorded
        if rec["path"] == path and isinstance(rec["body"], dict) and tool in tool_names(rec["body"])
    ]


def assert_upstream_credentials(
    recorded: list[dict[str, Any]],
    *,
    upstream_key: str,
    client_key: str,
    upstream_model: str,
    headers: tuple[str, ...],
) -> None:
    """Every upstream request carried the channel's key in ``headers`` (``authorization`` as a
    Bearer token), the redirected model, and no trace of the client's key."""
    assert recorded, "the upstream received nothing"
    for rec in recorded:
        assert client_key not in orjson.dumps(rec["headers"]).decode(), (
            f"client key forwarded: {rec['headers']}"
        )
        assert client_key not in orjson.dumps(rec["body"]).decode(), "client key forwarded in the body"
        for name in headers:
            expected = f"Bearer {upstream_key}" if name == "authorization" else upstream_key
            assert rec["headers"].get(name) == expected, (name, rec["headers"])
        assert rec["body"]["model"] == upstream_model


def masked(
    value: Any,
    paths: dict[str, Callable[[Any], bool]],
    here: str = "",
    *,
    dropped: dict[str, Callable[[Any], bool]] | None = None,
) -> Any:
    """A copy of ``value`` with the volatile members replaced by ``MASK``. ``paths`` maps a
    path pattern (``/input/*/id``: ``*`` is any list index) to a predicate on the parent object;
    ``dropped`` has the same form and removes the member instead (a known, accepted loss)."""
    dropped = dropped or {}
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            path = f"{here}/{key}"
            drop = dropped.get(path)
            if drop is not None and drop(value):
                continue
            rule = paths.get(path)
            out[key] = (
                MASK if rule is not None and rule(value) else masked(item, paths, path, dropped=dropped)
            )
        return out
    if isinstance(value, list):
        return [masked(item, paths, f"{here}/*", dropped=dropped) for item in value]
    return value


def first_difference(a: Any, b: Any, here: str = "") -> str | None:
    """The first path where two JSON values differ, with both sides, or None."""
    if type(a) is not type(b):
        return f"{here or '/'}: {a!r:.200} != {b!r:.200}"
    if isinstance(a, dict):
        for key in sorted(set(a) | set(b)):
            if key not in a or key not in b:
                return f"{here}/{key}: only in {'gateway' if key in b else 'direct'} run"
            found = first_difference(a[key], b[key], f"{here}/{key}")
            if found:
                return found
        return None
    if isinstance(a, list):
        if len(a) != len(b):
            return f"{here}: {len(a)} items != {len(b)} items"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            found = first_difference(x, y, f"{here}/{i}")
            if found:
                return found
        return None
    return None if a == b else f"{here or '/'}: {a!r:.200} != {b!r:.200}"


def fresh_run_folder(tmp: Path, leftovers: list[Path]) -> None:
    """Ready ``tmp`` for a second run in the same working folder: remove what the first run made
    (its home and the files it wrote), keep the folder paths identical."""
    shutil.rmtree(tmp / "home", ignore_errors=True)
    for path in leftovers:
        path.unlink(missing_ok=True)


ALWAYS: Callable[[Any], bool] = lambda _parent: True  # noqa: E731
