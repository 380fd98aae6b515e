"""Admin form fields for the JSON columns an operator edits by hand: rows of key/value inputs
instead of raw JSON, and empty instead of ``null``.

- ``RedirectRulesField``: ordered ``[{"pattern": regex, "replace": model}]`` (API keys, settings).
- ``HeaderMapField``: ``{"Header-Name": "value"}`` (channels).
- ``GlobListField``: comma- or line-separated globs (API keys' allowed models, passthrough
  whitelists), the same input as a rule's models.

The widgets post one input pair per row (``NAME__key`` / ``NAME__value``); a row whose two inputs
are empty is ignored, so two spare rows are always rendered and work without JavaScript. A small
script adds more rows.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import orjson
from django import forms

from transforms.forms import ModelGlobsField


class KeyValueRowsWidget(forms.Widget):
    template_name = "gateway/widgets/key_value_rows.html"
    spare_rows = 2

    def __init__(self, key_label: str, value_label: str, attrs: dict[str, Any] | None = None) -> None:
        super().__init__(attrs)
        self.key_label = key_label
        self.value_label = value_label

    def get_context(self, name: str, value: Any, attrs: dict[str, Any] | None) -> dict[str, Any]:
        context = super().get_context(name, value, attrs)
        rows = list(value or [])
        context["widget"].update(
            rows=rows + [("", "")] * self.spare_rows, key_label=self.key_label, value_label=self.value_label
        )
        return context

    def format_value(self, value: Any) -> list[tuple[str, str]]:  # type: ignore[override]
        return value if isinstance(value, list) else []

    def value_from_datadict(self, data, files, name: str) -> list[tuple[str, str]] | str | None:
        if name in data and f"{name}__key" not in data:  # raw JSON (tests, old forms): parse it as such
            return data.get(name)
        keys, values = data.getlist(f"{name}__key"), data.getlist(f"{name}__value")
        return [(k.strip(), v.strip()) for k, v in zip(keys, values, strict=False) if k.strip() or v.strip()]

    def value_omitted_from_data(self, data, files, name: str) -> bool:
        return f"{name}__key" not in data and name not in data


class _RowsField(forms.Field):
    """Rows of (key, value) in the form; the stored JSON shape is the subclass's."""

    key_label = value_label = ""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("required", False)
        kwargs.setdefault("widget", KeyValueRowsWidget(self.key_label, self.value_label))
        kwargs.pop("encoder", None), kwargs.pop("decoder", None), kwargs.pop("max_length", None)
        super().__init__(**kwargs)

    def prepare_value(self, value: Any) -> list[tuple[str, str]]:
        if isinstance(value, str):
            try:
                value = orjson.loads(value)
            except orjson.JSONDecodeError:
                return []
        return self.rows(value)

    def to_python(self, value: Any) -> Any:
        if isinstance(value, str):
            if value.strip() in ("", "null"):
                return None
            try:
                return orjson.loads(value) or None
            except orjson.JSONDecodeError as exc:
                raise forms.ValidationError("Enter valid JSON or use the rows.") from exc
        for key, val in value or []:
            if not key or not val:
                raise forms.ValidationError(
                    f"Each row needs both a {self.key_label.lower()} and a {self.value_label.lower()}."
                )
        return self.stored(value) if value else None

    def has_changed(self, initial: Any, data: Any) -> bool:
        try:
            return self.to_python(self.prepare_value(initial)) != self.to_python(data)
        except forms.ValidationError:
            return True

    def rows(self, value: Any) -> list[tuple[str, str]]:
        raise NotImplementedError

    def stored(self, rows: list[tuple[str, str]]) -> Any:
        raise NotImplementedError


class RedirectRulesField(_RowsField):
    key_label, value_label = "Pattern (regular expression, whole name)", "Replace with model"

    def rows(self, value: Any) -> list[tuple[str, str]]:
        return [
            (str(r.get("pattern", "")), str(r.get("replace", ""))) for r in value or [] if isinstance(r, dict)
        ]

    def stored(self, rows: list[tuple[str, str]]) -> list[dict[str, str]]:
        return [{"pattern": k, "replace": v} for k, v in rows]


class HeaderMapField(_RowsField):
    key_label, value_label = "Header", "Value"

    def rows(self, value: Any) -> list[tuple[str, str]]:
        return [(str(k), str(v)) for k, v in (value or {}).items()] if isinstance(value, dict) else []

    def stored(self, rows: list[tuple[str, str]]) -> dict[str, str]:
        return dict(rows)


class GlobListField(ModelGlobsField):
    def __init__(self, *, placeholder: str = "all models", **kwargs: Any) -> None:
        kwargs.pop("encoder", None), kwargs.pop("decoder", None)
        kwargs.setdefault("label", "Allowed models")
        kwargs.setdefault(
            "widget",
            forms.Textarea(
                attrs={"rows": 1, "cols": 40, "placeholder": placeholder, "class": "transform-models"}
            ),
        )
        super().__init__(**kwargs)


class LimitsWidget(forms.MultiWidget):
    def __init__(self, names: tuple[str, ...]) -> None:
        self.names = names
        super().__init__(
            [
                forms.NumberInput(attrs={"placeholder": name, "min": 1, "style": "width: 9em"})
                for name in names
            ]
        )

    def decompress(self, value: Any) -> list[Any]:
        if isinstance(value, str):
            try:
                value = orjson.loads(value)
            except orjson.JSONDecodeError:
                value = None
        value = value if isinstance(value, dict) else {}
        return [value.get(name) for name in self.names]


class LimitsField(forms.MultiValueField):
    """A few named limits (an API key's rpm, tpm, concurrency as positive integers, its spend
    caps as USD decimals) stored as one JSON object; blank inputs are left out, all blank is
    ``None``."""

    def __init__(self, names: tuple[str, ...], decimals: tuple[str, ...] = (), **kwargs: Any) -> None:
        self.names = names + decimals
        self.decimals = decimals
        kwargs.pop("encoder", None), kwargs.pop("decoder", None)
        fields = [forms.IntegerField(min_value=1, required=False) for _ in names]
        fields += [
            forms.DecimalField(min_value=Decimal("0.000000001"), decimal_places=9, required=False)
            for _ in decimals
        ]
        names = self.names
        super().__init__(
            fields, require_all_fields=False, required=False, widget=LimitsWidget(names), **kwargs
        )

    def compress(self, data_list: list[Any]) -> dict[str, Any] | None:
        limits = {
            name: (format(n.normalize(), "f") if name in self.decimals else n)
            for name, n in zip(self.names, data_list or [], strict=False)
            if n is not None
        }
        return limits or None
