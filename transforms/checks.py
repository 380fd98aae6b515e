"""System check over every registered transform (``manage.py check``, and Django runs it at
start-up of ``runserver``; ``gateway.asgi`` logs its findings when the production server starts).

What a built-in or a plug-in must satisfy to be offered to operators:

- ``transforms.E001``: a plug-in (entry point ``monogate.transforms``) failed to import, or its
  value is not a ``Transform`` subclass;
- ``transforms.E002``: an id or alias clash (the message names both packages);
- ``transforms.E003``: the config schema is not a valid JSON Schema (draft 2020-12), or not an
  object schema;
- ``transforms.E004``: a property's ``default`` does not validate against that property;
- ``transforms.E005``: an ``en`` or ``zh`` name or description is missing;
- ``transforms.E006``: phases or scopes that do not exist (or none at all), or an unknown category;
- ``transforms.E007``: a worked example fails (or declares a phase the transform lacks);
- ``transforms.W001``: a module in ``transforms/builtin/`` defines no transform (helpers belong in
  ``transforms/lib/``).

Each check is a plain function of one class so tests can run it on deliberately broken
transforms registered into a copy of the registry (``check_registry(reg)``).
"""

from __future__ import annotations

from typing import Any

from django.core import checks

from transforms.base import ALL_SCOPES, Transform
from transforms.registry import TransformRegistry

PHASES = ("request", "response")
CATEGORIES = ("cache", "field", "image", "prompt", "reasoning", "role", "stream")
LANGUAGES = ("en", "zh")


def check_transform(cls: type[Transform], origin: str | None = None) -> list[checks.CheckMessage]:
    """Every problem of one transform class (empty when it is fit to offer)."""
    label = f"transform {getattr(cls, 'type_id', cls.__name__)!r}" + (f" from {origin}" if origin else "")
    out: list[checks.CheckMessage] = []

    def error(code: str, msg: str, hint: str | None = None) -> None:
        out.append(checks.Error(f"{label}: {msg}", hint=hint, obj=cls, id=f"transforms.{code}"))

    schema_ok = _check_schema(cls, error)
    _check_texts(cls, error)
    phases = _check_phases_scopes(cls, error)
    _check_examples(cls, phases, schema_ok, error)
    return out


def _check_schema(cls: type[Transform], error) -> bool:
    """The config schema is valid draft 2020-12 and every default validates; True when valid.
    jsonschema is imported here, when the checks run (``manage.py check``, the launcher's checks
    process), not when ``ready()`` registers them: a proxy worker never runs them, and jsonschema
    with its dependencies is ~5 MB of each worker's resident memory."""
    import jsonschema

    schema = getattr(cls, "config_schema", None)
    if not isinstance(schema, dict) or schema.get("type") != "object":
        error("E003", 'config_schema must be a JSON Schema object with "type": "object".')
        return False
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "(root)"
        error("E003", f"config_schema is not valid JSON Schema (draft 2020-12) at {where}: {exc.message}")
        return False
    for path, prop in _properties_with_default(schema):
        problems = list(jsonschema.Draft202012Validator(prop).iter_errors(prop["default"]))
        if problems:
            error("E004", f"the default of {path} does not validate: {problems[0].message}")
    return True


def _check_texts(cls: type[Transform], error) -> None:
    for attr in ("name", "description"):
        value = getattr(cls, attr, None)
        missing = [
            lang
            for lang in LANGUAGES
            if not isinstance(value, dict) or not isinstance(value.get(lang), str) or not value[lang].strip()
        ]
        if missing:
            error(
                "E005", f"{attr} lacks {', '.join(missing)} text.", hint=f'{attr} = {{"en": ..., "zh": ...}}'
            )


def _check_phases_scopes(cls: type[Transform], error) -> tuple[str, ...]:
    phases = tuple(getattr(cls, "phases", ()) or ())
    scopes = tuple(getattr(cls, "scopes", ()) or ())
    if not phases or any(p not in PHASES for p in phases):
        error("E006", f"phases {phases!r} must be a non-empty subset of {PHASES}.")
    if not scopes or any(s not in ALL_SCOPES for s in scopes):
        error("E006", f"scopes {scopes!r} must be a non-empty subset of {ALL_SCOPES}.")
    if getattr(cls, "category", None) not in CATEGORIES:
        error("E006", f"category {getattr(cls, 'category', None)!r} must be one of {CATEGORIES}.")
    return phases


def _check_examples(cls: type[Transform], phases: tuple[str, ...], schema_ok: bool, error) -> None:
    from transforms.examples import check_example

    for i, example in enumerate(getattr(cls, "examples", ()) or ()):
        title = f"example {i} ({getattr(example, 'title', '?')!r})"
        if example.phase not in phases:
            error("E007", f"{title} is for the {example.phase} phase, which the transform does not support.")
            continue
        if schema_ok:
            bad = cls.validate_config(dict(example.config))
            if bad:
                error("E007", f"{title} has a config the transform refuses: {bad}")
                continue
        for problem in check_example(cls, example):
            error("E007", f"{title} fails: {problem}")


def check_registry(registry: TransformRegistry) -> list[checks.CheckMessage]:
    """Discovery problems (failed plug-ins, clashes) plus every registered transform's checks."""
    out: list[checks.CheckMessage] = []
    for problem in registry.problems:
        code = "E002" if problem.kind == "clash" else "E001"
        what = "clash" if problem.kind == "clash" else "could not be loaded"
        out.append(
            checks.Error(
                f"transform {what}: {problem.origin}: {problem.message}",
                hint="Uninstall or fix one of the packages; the gateway runs without it.",
                id=f"transforms.{code}",
            )
        )
    for module in registry.builtin_modules_without_transform:
        out.append(
            checks.Warning(
                f"{module} defines no transform.",
                hint="transforms/builtin/ holds only transforms; move helpers to transforms/lib/.",
                id="transforms.W001",
            )
        )
    for type_id, cls in registry.items():
        out.extend(check_transform(cls, registry.origin(type_id)))
    return out


@checks.register("transforms")
def transforms_check(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    from transforms.registry import registry

    return check_registry(registry)


def _properties_with_default(schema: dict[str, Any], prefix: str = "") -> list[tuple[str, dict[str, Any]]]:
    """(dotted path, property schema) for every property declaring a ``default``, nested objects
    included."""
    found = []
    for key, prop in (schema.get("properties") or {}).items():
        if not isinstance(prop, dict):
            continue
        path = f"{prefix}{key}"
        if "default" in prop:
            found.append((path, prop))
        if isinstance(prop.get("properties"), dict):
            found.extend(_properties_with_default(prop, path + "."))
    return found


def log_problems() -> int:
    """Run the transform checks and log each finding (server start-up, where nobody reads
    ``manage.py check``). Returns the number of errors; never raises, never stops the server."""
    import logging

    from transforms.registry import registry

    log = logging.getLogger("transforms.checks")
    try:
        found = check_registry(registry)
    except Exception:  # a check that crashes on an odd plug-in must not stop the server either
        log.exception("the transform checks failed")
        return 1
    for message in found:
        log.log(
            logging.ERROR if message.is_serious() else logging.WARNING,
            "%s: %s%s",
            message.id,
            message.msg,
            f" (hint: {message.hint})" if message.hint else "",
        )
    return sum(1 for m in found if m.is_serious())
