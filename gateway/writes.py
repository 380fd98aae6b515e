"""The one write path for configuration objects: helpers every app's ``services`` module uses.

The admin, the REST serializers and ``loadconfig`` all validate a configuration object with its
model's ``full_clean()`` and report problems as an *error tree*: a dict of field name to a list of
messages, or, for nested lists (a provider's channels, a channel's models), to a dict of index
(as a string, the shape DRF uses for list fields) to another error tree. The REST API returns
the tree as it is; the config file flattens it into ``path: message`` lines (:func:`flatten`).

The fields a front end may write are derived from the model (:func:`editable_fields`), so adding
a field to a model reaches the REST API, the config file and its schema without another list.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from django.core.exceptions import NON_FIELD_ERRORS, ValidationError
from django.db import models

ErrorTree = dict[str, Any]
# note(kind, what, label): what is "created", "updated" or "deleted"; used by loadconfig's report.
Note = Callable[[str, str, str], None]
NON_FIELD = "non_field_errors"


def editable_fields(model: type[models.Model], *, exclude: Iterable[str] = ()) -> tuple[str, ...]:
    """The model's writable configuration fields, in declaration order: concrete, editable, not the
    primary key (auto timestamps and stored secrets are ``editable=False`` on the models)."""
    skip = set(exclude)
    return tuple(
        f.name for f in model._meta.concrete_fields if f.editable and not f.primary_key and f.name not in skip
    )


def model_errors(
    obj: models.Model, *, exclude: list[str] | None = None, aliases: dict[str, str] | None = None
) -> dict[str, list[str]]:
    """``obj.full_clean()`` as an error tree (field -> messages); empty when valid."""
    try:
        obj.full_clean(exclude=exclude)
    except ValidationError as exc:
        details = exc.message_dict if hasattr(exc, "error_dict") else {NON_FIELD_ERRORS: exc.messages}
        out: dict[str, list[str]] = {}
        for name, messages in details.items():
            key = NON_FIELD if name == NON_FIELD_ERRORS else (aliases or {}).get(name, name)
            out.setdefault(key, []).extend(messages)
        return out
    return {}


def assign(obj: models.Model, data: dict[str, Any], fields: Iterable[str], *, reset_missing: bool) -> None:
    """Copy ``data`` onto ``obj`` for the given fields. With ``reset_missing`` (the config file: an
    entry describes the whole object) a field left out takes the model's default; a ``None`` for a
    field that cannot be null (a blank text or JSON field) also means the default."""
    meta = obj._meta
    for name in fields:
        field = meta.get_field(name)
        if name in data:
            value = data[name]
            if value is None and not field.null:
                value = field.get_default()
        elif reset_missing:
            value = field.get_default()
        else:
            continue
        setattr(obj, name, value)


def save_checked(
    obj: models.Model,
    *,
    aliases: dict[str, str] | None = None,
    note: Note | None = None,
    kind: str = "",
    label: str = "",
) -> dict[str, list[str]]:
    """Validate and save; return the errors instead of saving when there are any."""
    errors = model_errors(obj, aliases=aliases)
    if errors:
        return errors
    created = obj.pk is None
    obj.save()
    if note is not None:
        note(kind, "created" if created else "updated", label or str(obj))
    return {}


def by_index(errors: list[ErrorTree]) -> dict[str, ErrorTree]:
    """Per-item errors of a nested list keyed by index, the shape DRF itself uses for list fields."""
    return {str(i): e for i, e in enumerate(errors) if e}


def duplicates(items: list[dict[str, Any]], key: str) -> list[ErrorTree]:
    """One error tree per item: a duplicate ``key`` (after stripping) is an error on the later one."""
    seen: set[str] = set()
    errors: list[ErrorTree] = []
    for item in items:
        name = str(item.get(key, "")).strip()
        errors.append({key: [f"Duplicate {key} {name!r}."]} if name in seen else {})
        seen.add(name)
    return errors


def flatten(tree: ErrorTree, path: str, *, rename: Callable[[str], str] | None = None) -> list[str]:
    """An error tree as ``path.field: message`` lines (``path[i]`` for list items); several
    messages for one field are joined by spaces. ``rename`` maps this level's field names to the
    names the document used."""
    lines: list[str] = []
    for key, value in tree.items():
        if key == NON_FIELD:
            where = path
        elif key.isdigit():
            where = f"{path}[{key}]"
        else:
            where = f"{path}.{rename(key) if rename else key}"
        if isinstance(value, dict):
            lines.extend(flatten(value, where))
        else:
            lines.append(f"{where}: {' '.join(str(m) for m in value)}")
    return lines
