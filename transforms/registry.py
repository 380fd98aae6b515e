"""Registry of built-in transforms: every module in ``transforms/builtin/`` that defines a
``Transform`` subclass with a ``type_id`` is registered on first use."""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache

from transforms.base import Transform

# Historical ids accepted on input and stored under their canonical id.
ALIASES = {
    "append_empty_user_message": "prompt_append_empty_user",
    "developer_to_system_role": "role_developer_to_system",
    "force_stream": "stream_force",
    "inject_system_prompt": "prompt_inject_system",
    "merge_consecutive_roles": "role_merge_consecutive",
    "override_max_tokens": "field_override_max_tokens",
    "remove_field": "field_remove",
    "set_field": "field_set",
    "split_sse_frames": "stream_split_sse_frames",
    "strip_orphaned_tool_use": "prompt_strip_orphaned_tool_calls",
    "system_to_developer_role": "role_system_to_developer",
    "remove_anthropic_billing_header": "prompt_strip_anthropic_billing_header",
    "remove_anthropic_billing_headers": "prompt_strip_anthropic_billing_header",
    "strip_anthropic_billing_header": "prompt_strip_anthropic_billing_header",
    "strip_anthropic_billing_headers": "prompt_strip_anthropic_billing_header",
    "strip_claude_code_billing_header": "prompt_strip_anthropic_billing_header",
}


def canonical_id(type_id: str) -> str:
    """Historical ids from the table above or from a class's own ``aliases``."""
    if type_id in ALIASES:
        return ALIASES[type_id]
    reg = registry()  # not memoised here: tests swap the registry, and this never runs per request
    if type_id not in reg:
        for cls in reg.values():
            if type_id in getattr(cls, "aliases", ()):
                return cls.type_id
    return type_id


@cache
def registry() -> dict[str, type[Transform]]:
    import transforms.builtin as pkg

    found: dict[str, type[Transform]] = {}
    for info in pkgutil.iter_modules(pkg.__path__):
        module = importlib.import_module(f"{pkg.__name__}.{info.name}")
        for obj in vars(module).values():
            if isinstance(obj, type) and issubclass(obj, Transform) and obj is not Transform and getattr(obj, "type_id", None):
                if obj.__module__ == module.__name__:
                    found[obj.type_id] = obj
    return dict(sorted(found.items()))


def registry_entries() -> list[dict]:
    """What ``GET /api/transforms/registry`` returns."""
    return [
        {
            "type_id": cls.type_id,
            "category": cls.category,
            "name": dict(cls.name),
            "description": dict(cls.description),
            "supported_phases": list(cls.phases),
            "supported_scopes": list(cls.scopes),
            "config_schema": cls.config_schema,
        }
        for cls in registry().values()
    ]
