"""``GET /v1/models`` and ``GET /v1/models/{id}`` (reference protocols.md §6.1).

The list is the distinct logical models with at least one enabled provider and channel of
weight > 0 (the snapshot's routes), sorted by id and filtered by the key's allow-list,
independent of runtime health (an open circuit does not hide a model). ``models`` carries the
Codex model descriptors for the configured ``codex_model_ids`` that are listed (see
``codex_models``); OpenAI SDKs ignore the extra key."""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote

from .codex_models import codex_descriptors
from .errors import ClientError
from .routing import model_allowed
from .snapshot import KeySnap, Snapshot


def model_object(name: str) -> dict[str, Any]:
    return {"id": name, "object": "model", "created": 0, "owned_by": "gateway"}


def models_answer(snapshot: Snapshot, key: KeySnap, model_id: str | None) -> dict[str, Any]:
    """The list (``model_id`` None) or one model; an unknown or forbidden id is a 404."""
    if model_id is None:
        names = [n for n in snapshot.model_names if model_allowed(key, n)]
        return {
            "object": "list",
            "data": [model_object(n) for n in names],
            "models": codex_descriptors(snapshot.settings.codex_model_ids, names),
        }
    name = unquote(model_id)
    if name not in snapshot.routes or not model_allowed(key, name):
        raise ClientError(404, "model_not_found", f"Model not found: {name}", error_type="not_found_error")
    return model_object(name)
