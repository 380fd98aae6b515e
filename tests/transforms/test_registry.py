"""The TransformRegistry object: registration, lookup by id and alias, stable order, clashes,
autodiscovery of the built-ins and plug-ins from the ``monogate.transforms`` entry points."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from transforms.base import Transform
from transforms.registry import (
    ENTRY_POINT_GROUP,
    AlreadyRegistered,
    NotATransform,
    TransformRegistry,
    registry,
)

BUILTINS = {
    "field_alias_reserved_tool_names",
    "field_custom_tools_to_function",
    "field_override_max_tokens",
    "field_remove",
    "field_set",
    "field_strip_sampling",
    "prompt_append_empty_user",
    "prompt_inject_system",
    "prompt_strip_anthropic_billing_header",
    "prompt_strip_orphaned_tool_calls",
    "role_assistant_image_to_user",
    "role_developer_to_system",
    "role_merge_consecutive",
    "role_system_to_developer",
    "stream_force",
    "stream_split_sse_frames",
}


def make(type_id: str, aliases: tuple[str, ...] = ()) -> type[Transform]:
    return type(
        f"T_{type_id}",
        (Transform,),
        {
            "type_id": type_id,
            "aliases": aliases,
            "category": "field",
            "phases": ("request",),
            "name": {"en": type_id, "zh": type_id},
            "description": {"en": "test", "zh": "测试"},
        },
    )


def test_default_registry_has_the_builtins_in_id_order():
    assert BUILTINS <= set(registry.ids())
    assert [cls.type_id for cls in registry] == sorted(registry.ids())
    assert registry.origin("field_set") == "monogate (transforms.builtin.field_set)"
    assert registry.problems == [] and registry.builtin_modules_without_transform == []


def test_aliases_come_from_the_classes():
    assert registry.canonical_id("set_field") == "field_set"
    assert registry["split_sse_frames"] is registry["stream_split_sse_frames"]
    assert registry.get("strip_claude_code_billing_header").type_id == "prompt_strip_anthropic_billing_header"
    assert registry.canonical_id("no_such_thing") == "no_such_thing"
    assert registry.get("no_such_thing") is None and "no_such_thing" not in registry
    for alias, type_id in registry.aliases().items():
        assert alias in registry[type_id].aliases


def test_register_lookup_and_iteration_order():
    reg = TransformRegistry()
    b, a = make("b_one", ("old_b",)), make("a_one")
    assert reg.register(b) is b
    reg.register(a)
    assert [cls.type_id for cls in reg] == ["a_one", "b_one"] and len(reg) == 2
    assert reg["old_b"] is b and "old_b" in reg and reg.canonical_id("old_b") == "b_one"
    reg.register(b)  # the same class again is a no-op
    reg.unregister("old_b")
    assert reg.ids() == ["a_one"] and reg.canonical_id("old_b") == "old_b"


def test_clashes_name_both_owners_and_leave_the_registry_unchanged():
    reg = TransformRegistry()
    reg.register(make("x_id", ("x_old",)), origin="pkg-a 1.0 (a:X)")
    with pytest.raises(
        AlreadyRegistered, match=r"pkg-b 2.0.*'x_id' is already the id of 'x_id' from pkg-a 1.0"
    ):
        reg.register(make("x_id"), origin="pkg-b 2.0 (b:X)")
    with pytest.raises(AlreadyRegistered, match=r"'x_old' is already an alias of 'x_id' from pkg-a"):
        reg.register(make("y_id", ("x_old",)), origin="pkg-b 2.0 (b:Y)")
    with pytest.raises(AlreadyRegistered, match=r"'x_id' is already the id"):
        reg.register(make("z_id", ("x_id",)), origin="pkg-c (c:Z)")
    assert reg.ids() == ["x_id"] and reg.aliases() == {"x_old": "x_id"}


def test_register_refuses_what_is_not_a_transform():
    reg = TransformRegistry()
    with pytest.raises(NotATransform):
        reg.register(dict)
    with pytest.raises(NotATransform, match="no type_id"):
        reg.register(type("NoId", (Transform,), {}))


def test_copy_and_swapped_do_not_leak():
    before = registry.ids()
    reg = registry.copy()
    reg.register(make("only_in_copy"))
    assert "only_in_copy" not in registry
    with registry.swapped(reg):
        assert "only_in_copy" in registry and registry.get("set_field") is not None
    assert registry.ids() == before


def test_autodiscover_registers_every_builtin_module():
    reg = TransformRegistry()
    reg.autodiscover()
    assert set(reg.ids()) == set(registry.ids()) - _plugin_ids()
    assert reg.items() == [(t, registry[t]) for t in reg.ids()]


def _plugin_ids() -> set[str]:
    return {t for t in registry.ids() if not registry.origin(t).startswith("monogate (")}


# -- plug-ins through real entry points (a distribution on sys.path) ---------------------------


def _install(root: Path, dist: str, module: str, source: str, entry_points: dict[str, str]) -> None:
    (root / f"{module}.py").write_text(textwrap.dedent(source))
    info = root / f"{dist}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    lines = "".join(f"{name} = {value}\n" for name, value in entry_points.items())
    (info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\n{lines}")


PLUGIN = """
from transforms.base import Transform

class Shout(Transform):
    type_id = "test_plugin_shout"
    aliases = ("test_plugin_old_shout",)
    category = "prompt"
    name = {"en": "Shout", "zh": "大写"}
    description = {"en": "Test plug-in.", "zh": "测试插件。"}
    phases = ("request",)

class Clash(Transform):
    type_id = "field_set"
    category = "field"
    name = {"en": "Clash", "zh": "冲突"}
    description = {"en": "Takes a built-in id.", "zh": "占用内置 id。"}
    phases = ("request",)

NOT_A_TRANSFORM = 42
"""


def test_entry_points_register_plugins_and_keep_failures(tmp_path, monkeypatch, caplog):
    _install(
        tmp_path,
        "test_plugin_good",
        "test_plugin_good_mod",
        PLUGIN,
        {
            "shout": "test_plugin_good_mod:Shout",
            "clash": "test_plugin_good_mod:Clash",
            "number": "test_plugin_good_mod:NOT_A_TRANSFORM",
        },
    )
    _install(
        tmp_path,
        "test_plugin_bad",
        "test_plugin_bad_mod",
        "raise RuntimeError('boom at import')\n",
        {"bad": "test_plugin_bad_mod:Anything"},
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    reg = TransformRegistry()
    reg.autodiscover()
    reg.load_entry_points()
    assert reg["test_plugin_old_shout"].type_id == "test_plugin_shout"
    assert reg.origin("test_plugin_shout") == "test_plugin_good 1.0 (test_plugin_good_mod:Shout)"
    assert (
        reg["field_set"].__module__ == "transforms.builtin.field_set"
    )  # built-ins first, they keep their ids
    kinds = {(p.kind, p.origin.split(" (")[0]) for p in reg.problems}
    assert kinds == {
        ("import", "test_plugin_bad 1.0"),
        ("clash", "test_plugin_good 1.0"),
        ("invalid", "test_plugin_good 1.0"),
    }
    clash = next(p for p in reg.problems if p.kind == "clash")
    assert "test_plugin_good 1.0 (test_plugin_good_mod:Clash)" in clash.message
    assert "monogate (transforms.builtin.field_set)" in clash.message
    bad = next(p for p in reg.problems if p.kind == "import")
    assert "boom at import" in bad.message
    assert "failed to import" in caplog.text


@pytest.mark.django_db
def test_registry_endpoint_returns_aliases_and_examples(admin_user):
    from rest_framework.test import APIClient

    api = APIClient()
    api.force_authenticate(admin_user)
    entries = {e["type_id"]: e for e in api.get("/api/transforms/registry").json()}
    assert BUILTINS <= set(entries)
    field_set = entries["field_set"]
    assert field_set["aliases"] == ["set_field"] and field_set["supported_scopes"] == ["provider", "global"]
    first = field_set["examples"][0]
    assert first["phase"] == "request" and first["protocol"] == "chat_completion"
    assert first["config"] == {"path": "service_tier", "when_equals": "priority", "value": "fast"}
    assert first["input"]["service_tier"] == "priority" and first["expected"] == {"service_tier": "fast"}
    assert all(entry["examples"] for entry in entries.values())
