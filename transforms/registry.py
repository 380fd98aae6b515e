"""The transform registry: one object that knows every installed transform, in the spirit of
``django.contrib.admin.site``.

- ``registry`` (module level) is the default instance. ``TransformsConfig.ready()`` fills it at
  start-up: every module in ``transforms/builtin/`` (autodiscovery), then every entry point of the
  group ``monogate.transforms`` (user-written transforms shipped as Python packages).
- ``register(cls)`` adds a transform under its ``type_id`` and its ``aliases`` (historical ids,
  accepted on input and stored canonically). An id or alias that is already taken raises
  :class:`AlreadyRegistered` naming both owners; discovery catches that (and any import error of a
  plug-in), logs it and keeps it in ``problems`` for the system check (``transforms.checks``), so
  a broken plug-in never stops the gateway.
- Lookups (``get``, ``[]``, ``canonical_id``) accept a canonical id or an alias; iteration is in
  ``type_id`` order, so the admin, the registry endpoint and tests see a stable order.
- Tests build their own registry (``TransformRegistry()`` or ``registry.copy()``) and, when the
  code under test reads the default one (admin, REST API, snapshot), install it for the duration
  with ``registry.swapped(other)``: no module monkeypatching.

Discovery and validation happen once at start-up; nothing here runs per request.
"""

from __future__ import annotations

import importlib
import logging
import pkgutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import metadata
from typing import Any

from transforms.base import Transform

log = logging.getLogger("transforms.registry")

ENTRY_POINT_GROUP = "monogate.transforms"
BUILTIN_PACKAGE = "transforms.builtin"


class AlreadyRegistered(Exception):
    """An id or alias is already taken; the message names both owners."""


class NotATransform(TypeError):
    """Something that is not a ``Transform`` subclass with a ``type_id`` was registered."""


@dataclass(frozen=True, slots=True)
class RegistryProblem:
    """Something discovery could not register: shown by ``manage.py check`` and logged."""

    kind: str  # "import" (a plug-in or module failed to load), "clash", "invalid"
    origin: str  # who brought it: "monogate (transforms.builtin.x)", "pkg 1.0 (mod:Cls)"
    message: str


class TransformRegistry:
    """Installed transforms by canonical id, with their aliases and where each came from."""

    def __init__(self) -> None:
        self._by_id: dict[str, type[Transform]] = {}
        self._aliases: dict[str, str] = {}
        self._origins: dict[str, str] = {}
        self.problems: list[RegistryProblem] = []
        self.builtin_modules_without_transform: list[str] = []

    # -- registration ---------------------------------------------------------------------------
    def register(self, cls: type[Transform], *, origin: str | None = None) -> type[Transform]:
        """Add ``cls`` under its ``type_id`` and ``aliases``. Returns ``cls`` (usable as a class
        decorator). Raises :class:`AlreadyRegistered` when any of those names is taken, leaving the
        registry unchanged."""
        if not (isinstance(cls, type) and issubclass(cls, Transform) and cls is not Transform):
            raise NotATransform(f"{cls!r} is not a Transform subclass")
        type_id = getattr(cls, "type_id", None)
        if not isinstance(type_id, str) or not type_id:
            raise NotATransform(f"{cls.__module__}.{cls.__qualname__} has no type_id")
        origin = origin or _origin_of(cls)
        names = [type_id, *getattr(cls, "aliases", ())]
        clashes = []
        for name in names:
            owner = self._owner(name)
            if owner is not None and self._by_id[owner] is not cls:
                clashes.append(
                    f"{name!r} is already {'the id' if name == owner else 'an alias'} of {owner!r} "
                    f"from {self._origins[owner]}"
                )
        duplicates = {n for n in names if names.count(n) > 1}
        if duplicates:
            clashes.append(f"{sorted(duplicates)} listed twice")
        if clashes:
            raise AlreadyRegistered(f"cannot register {type_id!r} from {origin}: " + "; ".join(clashes))
        if type_id in self._by_id:  # the same class again: nothing to do
            return cls
        self._by_id[type_id] = cls
        self._origins[type_id] = origin
        for alias in names[1:]:
            self._aliases[alias] = type_id
        return cls

    def unregister(self, type_id: str) -> None:
        cls = self._by_id.pop(self.canonical_id(type_id))
        self._origins.pop(cls.type_id, None)
        self._aliases = {a: t for a, t in self._aliases.items() if t != cls.type_id}

    def _owner(self, name: str) -> str | None:
        if name in self._by_id:
            return name
        return self._aliases.get(name)

    def _register_found(self, cls: type[Transform], origin: str) -> None:
        """Register during discovery: a refusal is logged and kept, never raised."""
        try:
            self.register(cls, origin=origin)
        except AlreadyRegistered as exc:
            log.error("transform not registered: %s", exc)
            self.problems.append(RegistryProblem("clash", origin, str(exc)))
        except NotATransform as exc:
            log.error("transform not registered: %s: %s", origin, exc)
            self.problems.append(RegistryProblem("invalid", origin, str(exc)))

    # -- discovery ------------------------------------------------------------------------------
    def autodiscover(self, package: str = BUILTIN_PACKAGE) -> None:
        """Import every module of ``package`` and register the ``Transform`` subclasses defined in
        it (not ones it imports). Built-in modules are ours: an import error there is a bug and
        is raised."""
        pkg = importlib.import_module(package)
        for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda i: i.name):
            module = importlib.import_module(f"{package}.{info.name}")
            found = [
                obj
                for obj in vars(module).values()
                if isinstance(obj, type)
                and issubclass(obj, Transform)
                and obj is not Transform
                and obj.__module__ == module.__name__
                and getattr(obj, "type_id", None)
            ]
            if not found:
                self.builtin_modules_without_transform.append(module.__name__)
            for cls in found:
                self._register_found(cls, f"monogate ({module.__name__})")

    def load_entry_points(self, group: str = ENTRY_POINT_GROUP) -> None:
        """Register the transform named by every entry point of ``group``. A plug-in that fails to
        import, or whose value is not a transform, is logged and kept in ``problems``."""
        for ep in sorted(metadata.entry_points(group=group), key=lambda e: (e.name, e.value)):
            dist = getattr(ep, "dist", None)
            origin = f"{dist.name} {dist.version} ({ep.value})" if dist is not None else f"({ep.value})"
            try:
                obj = ep.load()
            except Exception as exc:  # any plug-in bug; the gateway keeps running without it
                log.exception("transform plug-in %s failed to import", origin)
                self.problems.append(RegistryProblem("import", origin, f"{type(exc).__name__}: {exc}"))
                continue
            self._register_found(obj, origin)

    def load(self) -> TransformRegistry:
        """Built-ins, then plug-ins (so a plug-in cannot take a built-in's id)."""
        self.autodiscover()
        self.load_entry_points()
        return self

    # -- lookup ---------------------------------------------------------------------------------
    def canonical_id(self, type_id: str) -> str:
        """The canonical id for an alias; any other string unchanged (unknown ids included, so
        validation can say precisely which id is unknown)."""
        return self._aliases.get(type_id, type_id)

    def get(self, type_id: str, default: Any = None) -> type[Transform] | Any:
        return self._by_id.get(self.canonical_id(type_id), default)

    def __getitem__(self, type_id: str) -> type[Transform]:
        return self._by_id[self.canonical_id(type_id)]

    def __contains__(self, type_id: object) -> bool:
        return isinstance(type_id, str) and self.canonical_id(type_id) in self._by_id

    def __iter__(self) -> Iterator[type[Transform]]:
        return iter(self._by_id[t] for t in sorted(self._by_id))

    def __len__(self) -> int:
        return len(self._by_id)

    def ids(self) -> list[str]:
        return sorted(self._by_id)

    def items(self) -> list[tuple[str, type[Transform]]]:
        return [(t, self._by_id[t]) for t in sorted(self._by_id)]

    def aliases(self) -> dict[str, str]:
        """Alias -> canonical id."""
        return dict(self._aliases)

    def origin(self, type_id: str) -> str | None:
        """Who registered it: ``monogate (transforms.builtin.x)`` or ``<dist> <version> (<value>)``."""
        return self._origins.get(self.canonical_id(type_id))

    # -- tests ----------------------------------------------------------------------------------
    def copy(self) -> TransformRegistry:
        """An independent registry with the same contents (register test transforms into it)."""
        other = TransformRegistry()
        other._by_id = dict(self._by_id)
        other._aliases = dict(self._aliases)
        other._origins = dict(self._origins)
        other.problems = list(self.problems)
        other.builtin_modules_without_transform = list(self.builtin_modules_without_transform)
        return other

    @contextmanager
    def swapped(self, other: TransformRegistry) -> Iterator[TransformRegistry]:
        """Let ``other``'s contents answer for this registry inside the block (tests of code that
        reads the default registry); restored afterwards. ``other`` itself is not modified."""
        saved = self.copy()
        self._assign(other)
        try:
            yield self
        finally:
            self._assign(saved)

    def _assign(self, other: TransformRegistry) -> None:
        self._by_id = dict(other._by_id)
        self._aliases = dict(other._aliases)
        self._origins = dict(other._origins)
        self.problems = list(other.problems)
        self.builtin_modules_without_transform = list(other.builtin_modules_without_transform)

    def __call__(self) -> TransformRegistry:
        """Compatibility with the old ``registry()`` function: returns the registry itself, which
        reads like the old mapping (``registry()[id]``, ``.get``, ``.items()``). New code uses the
        object directly."""
        return self

    def __repr__(self) -> str:
        return f"<TransformRegistry: {len(self)} transforms>"

    # -- what the API and admin show ------------------------------------------------------------
    def entries(self) -> list[dict[str, Any]]:
        """What ``GET /api/transforms/registry`` returns, one entry per transform."""
        return [describe(cls) for cls in self]


def describe(cls: type[Transform]) -> dict[str, Any]:
    """A transform as the registry endpoint and the admin show it."""
    return {
        "type_id": cls.type_id,
        "category": cls.category,
        "name": dict(cls.name),
        "description": dict(cls.description),
        "supported_phases": list(cls.phases),
        "supported_scopes": list(cls.scopes),
        "config_schema": cls.config_schema,
        "aliases": list(cls.aliases),
        "examples": [example_payload(e) for e in cls.examples],
    }


def example_payload(example: Any) -> dict[str, Any]:
    return {
        "title": example.title,
        "phase": example.phase,
        "protocol": example.protocol,
        "config": example.config,
        "input": example.input,
        "expected": example.expected,
        "context": example.context,
        "absent": list(example.absent),
        "note": example.note,
    }


def _origin_of(cls: type) -> str:
    module = cls.__module__
    if module.startswith(BUILTIN_PACKAGE + "."):
        return f"monogate ({module})"
    return f"{module}:{cls.__qualname__}"


registry = TransformRegistry()


def canonical_id(type_id: str) -> str:
    """The default registry's ``canonical_id``. Kept, like ``registry()``, for transforms and tests
    written against the old module functions while the remaining built-ins land; new code calls
    ``registry.canonical_id``."""
    return registry.canonical_id(type_id)
