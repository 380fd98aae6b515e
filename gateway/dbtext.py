"""NUL characters and the database. PostgreSQL refuses a NUL character in text and in JSON
strings, and SQLite stores it: a value with one was a 500 on PostgreSQL (or a row that never
landed) and fine on SQLite.

- Traffic (a client's model name, an upstream's error message) is stored by the writers with raw
  SQL: ``storable`` puts U+FFFD in place of NUL, on every backend, so both store the same text.
- Configuration goes through ``full_clean`` (the admin, the REST API, the config file):
  ``RefuseNulCharacters`` refuses NUL in any text or JSON field there. Django's form fields and
  DRF's ``CharField`` already refuse it in plain text; JSON values (a rule's config, a key's
  model list) went unchecked."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError

NUL = "\x00"
REPLACEMENT = "\ufffd"
MESSAGE = "Null characters are not allowed."


def storable(text: str) -> str:
    """``text`` without NUL characters (the same object when it has none: the common case costs
    one search)."""
    return text.replace(NUL, REPLACEMENT) if NUL in text else text


def holds_nul(value: Any) -> bool:
    """Whether a string anywhere in ``value`` (a key or a value of nested dicts and lists) holds
    a NUL character. Iterative: a deeply nested value cannot exhaust the stack."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if NUL in item:
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return False


class RefuseNulCharacters:
    """Model mixin: ``full_clean`` reports a NUL character in any field as that field's error,
    beside the field's own errors."""

    def clean_fields(self, exclude: Any = None) -> None:
        errors: dict[str, Any] = {}
        try:
            super().clean_fields(exclude=exclude)  # type: ignore[misc]
        except ValidationError as exc:
            errors = exc.update_error_dict(errors)
        for field in self._meta.concrete_fields:  # type: ignore[attr-defined]
            if exclude and field.name in exclude or field.name in errors:
                continue
            if holds_nul(getattr(self, field.attname)):
                errors[field.name] = [ValidationError(MESSAGE, code="null_characters_not_allowed")]
        if errors:
            raise ValidationError(errors)
