"""Rule forms for the chain editors (provider, global, API key).

The config is edited through a form generated in the browser from the transform's JSON Schema
(``static/transforms/rule_form.js``); the server side here only:

- offers the transforms that fit the editor's scope, grouped by category, with descriptions;
- carries the config as JSON in a hidden input (``SchemaConfigWidget``) and hands the scope's
  schemas to the page;
- turns model globs into a friendly comma/line separated input;
- sets the rule's scope *before* model validation, so ``TransformRule.clean()`` (and through it
  ``transforms.validation.validate_rule``) judges the rule in the right scope;
- passes the ``config`` messages (``dotted.path: message``) to the widget, whose script puts each
  one next to the generated field it names.

The registry is read lazily (on form construction), never at import: ``transforms.admin`` is
imported while apps load.
"""

from __future__ import annotations

import re
from typing import Any

import orjson
from django import forms
from django.core.exceptions import ValidationError

from transforms.models import MODELS_HELP, TransformRule
from transforms.registry import example_payload, registry

CATEGORY_LABELS = {
    "cache": "Cache (prompt caching)",
    "field": "Field (typed and raw fields)",
    "image": "Image",
    "prompt": "Prompt (message list)",
    "reasoning": "Reasoning",
    "role": "Role",
    "stream": "Stream",
}
_GLOB_SPLIT = re.compile(r"[,\n\r]+")
NOT_INSTALLED = "not installed: requests that reach this rule fail with 500 transform_init_failed"


def transforms_for_scope(scope: str) -> dict[str, Any]:
    """What the page needs to build config forms: per type id its name, description, category,
    phases, schema and worked examples (shown under the description), for the transforms allowed in ``scope`` (sorted by category, then id)."""
    entries = {}
    for type_id, cls in sorted(registry.items(), key=lambda kv: (kv[1].category, kv[0])):
        if scope in cls.scopes:
            entries[type_id] = {
                "name": dict(cls.name),
                "description": dict(cls.description),
                "category": cls.category,
                "phases": list(cls.phases),
                "schema": cls.config_schema,
                "examples": [example_payload(e) for e in cls.examples],
            }
    return entries


def transform_choices(scope: str, current: str | None = None) -> list:
    """Select choices grouped by category (rendered as ``<optgroup>``). A stored id that is not
    offered in this scope (unknown, or not allowed here) is kept as a choice so the row still
    renders; validation then explains what is wrong with it."""
    groups: dict[str, list[tuple[str, str]]] = {}
    for type_id, entry in transforms_for_scope(scope).items():
        label = f"{entry['name']['en']} ({type_id})"
        groups.setdefault(entry["category"], []).append((type_id, label))
    choices: list = [("", "---------")]
    choices += [(CATEGORY_LABELS.get(cat, cat.title()), opts) for cat, opts in groups.items()]
    if current and not any(current == value for _, opts in choices[1:] for value, _ in opts):
        if current in registry:
            choices.append(("Not available here", [(current, f"{current} (not available in this scope)")]))
        else:
            choices.append(("Broken rule", [(current, f"{current} ({NOT_INSTALLED})")]))
    return choices


class TransformChoiceField(forms.ChoiceField):
    """The picker's choices are a convenience, not the rule: any id reaches the model's
    validation, which says precisely why an id is unknown or not allowed in this scope."""

    def valid_value(self, value: str) -> bool:
        return bool(value)


class TransformSelect(forms.Select):
    """A select whose options carry the transform's description, shown under the picker."""

    descriptions: dict[str, str]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.descriptions = {}

    def create_option(self, name, value, label, selected, index, subindex=None, attrs=None):
        option = super().create_option(name, value, label, selected, index, subindex=subindex, attrs=attrs)
        description = self.descriptions.get(str(value))
        if description:
            option["attrs"]["data-description"] = description
            option["attrs"]["title"] = description
        elif value and str(value) not in registry:
            option["attrs"]["data-broken"] = NOT_INSTALLED
        return option


class SchemaConfigWidget(forms.Widget):
    """A hidden JSON input plus a container the script fills with a form built from the
    selected transform's schema. ``errors`` are the server's config messages for this rule;
    ``registry`` (when set) embeds the scope's schemas in the widget itself, for pages with a
    single rule; chain editors embed them once per formset instead."""

    template_name = "transforms/widgets/schema_config.html"

    def __init__(self, attrs: dict | None = None) -> None:
        super().__init__(attrs)
        self.scope = ""
        self.errors: list[str] = []
        self.registry: dict[str, Any] | None = None

    def format_value(self, value: Any) -> str:
        if value is None or value == "":
            return "{}"
        if isinstance(value, str):
            return value  # bound data (possibly invalid JSON) goes back as typed
        return orjson.dumps(value).decode()

    def get_context(self, name, value, attrs):
        context = super().get_context(name, value, attrs)
        context["widget"].update(
            {
                "scope": self.scope,
                "registry_id": registry_element_id(self.scope),
                "registry": self.registry,
                "errors_json": orjson.dumps([str(e) for e in self.errors]).decode(),
            }
        )
        return context

    class Media:
        js = ("transforms/rule_form.js",)
        css = {"all": ("transforms/rule_form.css",)}


def registry_element_id(scope: str) -> str:
    return f"transform-registry-{scope}"


class ModelGlobsField(forms.CharField):
    """Globs typed as ``gpt-4*, claude-*`` or one per line; empty means every model (None)."""

    widget = forms.Textarea(
        attrs={"rows": 1, "cols": 40, "placeholder": "all models", "class": "transform-models"}
    )

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("required", False)
        kwargs.setdefault("label", "Models")
        kwargs.setdefault(
            "help_text",
            "Comma- or line-separated globs, matched against the client's logical "
            "model (never the redirected upstream model): * any run, ? one "
            "character, case-sensitive, whole name. Empty: all models.",
        )
        super().__init__(strip=False, **kwargs)

    def prepare_value(self, value: Any) -> str:
        if isinstance(value, list | tuple):
            return ", ".join(str(v) for v in value)
        return "" if value is None else str(value)

    def to_python(self, value: Any) -> list[str] | None:
        if isinstance(value, str) and value.strip() in ("null", "[]"):
            return None
        if isinstance(value, str) and value.strip().startswith("["):  # JSON list, as stored or pasted
            try:
                parsed = orjson.loads(value)
            except orjson.JSONDecodeError:
                parsed = None
            if isinstance(parsed, list):
                value = parsed
        if isinstance(value, list | tuple):
            globs = [str(v).strip() for v in value]
        else:
            globs = [part.strip() for part in _GLOB_SPLIT.split(value or "")]
        globs = [g for g in globs if g]
        return globs or None

    def has_changed(self, initial: Any, data: Any) -> bool:
        return self.to_python(initial) != self.to_python(data)


class TransformRuleForm(forms.ModelForm):
    """One rule. Subclasses made by ``rule_form_for`` fix the scope."""

    scope = ""
    embed_registry = False

    models = ModelGlobsField()

    class Meta:
        model = TransformRule
        fields = ("position", "transform", "phase", "enabled", "models", "config")
        help_texts = {"models": MODELS_HELP}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Scope first: the model's clean() validates against it.
        self.instance.scope = self.scope
        current = self.instance.transform or None
        if current:
            self.initial.setdefault("transform", registry.canonical_id(current))
        entries = transforms_for_scope(self.scope)
        select = TransformSelect(attrs={"class": "transform-picker"})
        select.descriptions = {tid: e["description"]["en"] for tid, e in entries.items()}
        self.fields["transform"] = TransformChoiceField(
            label="Transform",
            choices=transform_choices(self.scope, registry.canonical_id(current) if current else None),
            widget=select,
        )
        widget = SchemaConfigWidget()
        widget.scope = self.scope
        if self.embed_registry:
            widget.registry = entries
        self.fields["config"] = forms.JSONField(required=False, widget=widget, label="Config")
        self.fields["position"].widget.attrs.update({"class": "transform-position", "min": 0})
        self.fields["position"].help_text = "Rules run in ascending position order."

    def clean_transform(self) -> str:
        return registry.canonical_id(self.cleaned_data["transform"])

    def clean_config(self) -> dict:
        value = self.cleaned_data.get("config")
        return {} if value is None else value  # a missing config is normalised to {}

    def _post_clean(self) -> None:
        self.instance.scope = self.scope
        super()._post_clean()
        self.fields["config"].widget.errors = list(self.errors.get("config", []))

    def add_error(self, field, error) -> None:
        # Messages for fields this form does not show (scope, owner) are not lost.
        if isinstance(error, ValidationError) and hasattr(error, "error_dict"):
            for key in list(error.error_dict):
                if key not in self.fields and key != "__all__":
                    error.error_dict.setdefault("__all__", []).extend(error.error_dict.pop(key))
        super().add_error(field, error)


def rule_form_for(scope: str, *, embed_registry: bool = False) -> type[TransformRuleForm]:
    return type(
        f"{scope.title().replace('_', '')}TransformRuleForm",
        (TransformRuleForm,),
        {"scope": scope, "embed_registry": embed_registry},
    )
