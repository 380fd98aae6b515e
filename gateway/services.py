"""Writing the global settings row: the one path the REST API and ``loadconfig`` share."""

from __future__ import annotations

from typing import Any

from gateway.models import GlobalSettings
from gateway.writes import ErrorTree, Note, assign, editable_fields, save_checked

SETTINGS_FIELDS = editable_fields(GlobalSettings)


def write_settings(
    settings_row: GlobalSettings,
    data: dict[str, Any],
    *,
    reset_missing: bool = False,
    note: Note | None = None,
) -> ErrorTree:
    """Apply ``data`` to the singleton; with ``reset_missing`` omitted fields take their defaults."""
    assign(settings_row, data, SETTINGS_FIELDS, reset_missing=reset_missing)
    return save_checked(settings_row, note=note, kind="settings", label="global settings")
