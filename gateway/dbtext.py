"""Values the database cannot store. PostgreSQL refuses a NUL character in text and in JSON
strings, and NaN or Infinity in JSON (they are not JSON); SQLite stores all of them. Such a value
was a 500 on PostgreSQL (or a row that never landed) and fine on SQLite.

- Traffic (a client's model name, an upstream's error message) is stored by the writers with raw
  SQL: ``storable`` puts U+FFFD in place of NUL, on every backend, so both store the same text.
- Configuration goes through ``full_clean`` (the admin, the REST API, the config file):
  ``StorableValues`` refuses NUL in any text or JSON field there, and a number that is not finite
  in a JSON field. Django's form fields and DRF's ``CharField`` already refuse NUL in plain text,
  and DRF's JSON parser refuses NaN; a JSON value from the admin's forms or a YAML file
  (``.nan``), and NUL inside any JSON value, went unchecked."""

from __future__ import annotations

import math
from typing import Any

from django.core.exceptions import ValidationError
from django.db import models

NUL = "\x00"
REPLACEMENT = "\ufffd"
MESSAGE = "Null characters are not allowed."
NOT_FINITE = "Numbers must be finite: NaN and Infinity are not JSON."


def storable(text: str) -> str:
    """``text`` without NUL characters (the same object when it has none: the common case costs
    one search)."""
    return text.replace(NUL, REPLACEMENT) if NUL in text else text


def problem(value: Any, *, json: bool) -> str | None:
    """Why ``value`` cannot be stored, or None: a NUL character in a string anywhere in it (a key
    or a value of nested dicts and lists), or, in a JSON field, a number that is not finite.
    Iterative: a deeply nested value cannot exhaust the stack."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if NUL in item:
                return MESSAGE
        elif isinstance(item, float):
            if json and not math.isfinite(item):
                return NOT_FINITE
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return None


class StorableValues:
    """Model mixin: ``full_clean`` reports a value the database cannot store as that field's
    error, beside the fields' own errors."""

    def clean_fields(self, exclude: Any = None) -> None:
        errors: dict[str, Any] = {}
        try:
            super().clean_fields(exclude=exclude)  # type: ignore[misc]
        except ValidationError as exc:
            errors = exc.update_error_dict(errors)
        for field in self._meta.concrete_fields:  # type: ignore[attr-defined]
            if exclude and field.name in exclude or field.name in errors:
                continue
            why = problem(getattr(self, field.attname), json=isinstance(field, models.JSONField))
            if why is not None:
                errors[field.name] = [ValidationError(why, code="not_storable")]
        if errors:
            raise ValidationError(errors)
