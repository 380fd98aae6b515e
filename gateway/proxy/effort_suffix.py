"""The normalised logical model: a requested name that ends with a reasoning-effort suffix
(``gpt-5-high``, ``claude-sonnet-4-thinking``) resolves to its base model and sets the effort.

Rules (reference: transforms.md 2.3/2.4, step 1 of every attempt):

- Built-in suffixes: ``-none``, ``-minimal``, ``-low``, ``-medium``, ``-high``, ``-xhigh``,
  ``-max``; the global setting ``reasoning_effort_suffixes`` adds or overrides entries (e.g.
  ``{"-thinking": "high", "-nothinking": "none"}``).
- Only when the requested name is not itself served and the base name is: a provider that
  publishes ``o3-high`` as a model of its own keeps it. The longest matching suffix wins
  (``-xhigh`` before ``-high``).
- The suffix sets the effort, replacing one the client sent in the body: the model name is the
  deliberate choice of clients that cannot send an effort at all.
- Routing, allow-lists and transform globs see the base name; the capture keeps the requested
  name in the client request it stores.

Pure functions over the snapshot's route table: no I/O, no ORM.
"""

from __future__ import annotations

from collections.abc import Container, Mapping

from gateway.urp import ReasoningConfig, Request
from gateway.urp.request import REASONING_EFFORTS

BUILTIN_SUFFIXES: dict[str, str] = {f"-{effort}": effort for effort in REASONING_EFFORTS}

Suffixes = tuple[tuple[str, str], ...]


def compile_suffixes(custom: Mapping[str, str] | None = None) -> Suffixes:
    """Built-in plus configured suffixes, longest first (so ``-xhigh`` is tried before ``-high``).
    Entries whose effort is not a known effort are ignored (the settings form refuses them)."""
    merged = dict(BUILTIN_SUFFIXES)
    for suffix, effort in (custom or {}).items():
        if isinstance(suffix, str) and suffix and effort in REASONING_EFFORTS:
            merged[suffix] = effort
    return tuple(sorted(merged.items(), key=lambda item: (-len(item[0]), item[0])))


BUILTIN: Suffixes = compile_suffixes()


def normalise(model: str, served: Container[str], suffixes: Suffixes = BUILTIN) -> tuple[str, str | None]:
    """(normalised model, effort or None)."""
    if model in served:
        return model, None
    for suffix, effort in suffixes:
        if len(model) > len(suffix) and model.endswith(suffix):
            base = model[: -len(suffix)]
            if base in served:
                return base, effort
    return model, None


def apply(req: Request, model: str, served: Container[str], suffixes: Suffixes = BUILTIN) -> str:
    """Normalise ``model`` (the logical model after the key's redirects); when a suffix was
    recognised, set ``req.reasoning.effort``. Returns the normalised logical model."""
    base, effort = normalise(model, served, suffixes)
    if effort is not None:
        if req.reasoning is None:
            req.reasoning = ReasoningConfig(effort=effort)
        else:
            req.reasoning.effort = effort
    return base


def validate_suffix_map(value: object) -> list[str]:
    """Problems with a configured suffix map (empty when valid), for the settings write path."""
    if not isinstance(value, dict):
        return ['Must be an object mapping a suffix (e.g. "-thinking") to an effort.']
    errors = []
    for suffix, effort in value.items():
        if not isinstance(suffix, str) or len(suffix) < 2 or suffix.strip() != suffix:
            errors.append(f"{suffix!r}: a suffix is at least two characters, without surrounding spaces.")
        elif effort not in REASONING_EFFORTS:
            errors.append(f"{suffix!r}: effort must be one of {', '.join(REASONING_EFFORTS)}.")
    return errors
