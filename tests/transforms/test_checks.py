"""The transforms system check fails loudly on deliberately broken transforms registered into a
copy of the registry: schema errors, defaults that do not validate, missing translations, illegal
phases/scopes, failing worked examples, id clashes between packages, plug-ins that fail to import."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from transforms.base import Transform, TransformExample
from transforms.checks import check_registry, check_transform
from transforms.registry import RegistryProblem, TransformRegistry, registry


class Good(Transform):
    type_id = "test_check_good"
    category = "prompt"
    name = {"en": "Good", "zh": "好"}
    description = {"en": "Upper-cases nothing.", "zh": "什么也不做。"}
    phases = ("request",)
    config_schema = {
        "type": "object",
        "properties": {"n": {"type": "integer", "minimum": 1, "default": 2}},
        "additionalProperties": False,
    }
    examples = (
        TransformExample(
            title="unchanged",
            phase="request",
            input={"model": "m", "messages": [{"role": "user", "content": "hi"}]},
            expected={"messages": [{"role": "user", "content": "hi"}]},
        ),
    )


def variant(**attrs) -> type[Transform]:
    return type("Broken", (Good,), {"type_id": "test_check_broken", **attrs})


def codes(cls: type[Transform]) -> list[str]:
    return [m.id for m in check_transform(cls)]


def test_the_shipped_transforms_pass():
    assert [m for m in check_registry(registry) if m.is_serious()] == []


def test_a_good_transform_passes():
    assert check_transform(Good) == []


def test_invalid_schema():
    found = check_transform(
        variant(config_schema={"type": "object", "properties": {"n": {"type": "integr"}}})
    )
    assert [m.id for m in found] == ["transforms.E003"]
    assert "draft 2020-12" in found[0].msg and "properties/n/type" in found[0].msg
    assert codes(variant(config_schema={"type": "string"})) == ["transforms.E003"]


def test_default_that_does_not_validate():
    schema = {
        "type": "object",
        "properties": {
            "n": {"type": "integer", "minimum": 1, "default": 0},
            "o": {"type": "object", "properties": {"s": {"enum": ["a"], "default": "b"}}},
        },
    }
    found = check_transform(variant(config_schema=schema))
    assert [m.id for m in found] == ["transforms.E004", "transforms.E004"]
    assert "default of n" in found[0].msg and "default of o.s" in found[1].msg


def test_missing_translations():
    found = check_transform(variant(name={"en": "Only English"}, description={"en": " ", "zh": "描述"}))
    assert [m.id for m in found] == ["transforms.E005", "transforms.E005"]
    assert "name lacks zh" in found[0].msg and "description lacks en" in found[1].msg


def test_illegal_phases_scopes_category():
    found = check_transform(variant(phases=("request", "both"), scopes=("tenant",), category="misc"))
    assert [m.id for m in found] == ["transforms.E006"] * 3


def test_failing_example():
    wrong = TransformExample(
        title="claims a change",
        phase="request",
        input={"model": "m", "messages": [{"role": "user", "content": "hi"}]},
        expected={"messages": [{"role": "user", "content": "HI"}]},
    )
    found = check_transform(variant(examples=(wrong,)))
    assert [m.id for m in found] == ["transforms.E007"]
    assert "('claims a change') fails: messages: expected" in found[0].msg


def test_example_for_a_phase_the_transform_lacks_or_with_a_refused_config():
    response = TransformExample(title="resp", phase="response", input={}, expected={})
    bad_config = TransformExample(title="cfg", phase="request", input={}, expected={}, config={"n": 0})
    found = check_transform(variant(examples=(response, bad_config)))
    assert [m.id for m in found] == ["transforms.E007", "transforms.E007"]
    assert "response phase" in found[0].msg and "refuses" in found[1].msg


def test_clash_and_import_failure_are_reported_naming_both_packages():
    reg = TransformRegistry()
    reg.register(Good, origin="pkg-a 1.0 (a:Good)")
    reg._register_found(variant(type_id="test_check_good"), "pkg-b 2.0 (b:Good)")
    reg.problems.append(
        RegistryProblem("import", "pkg-c 0.1 (c:T)", "ModuleNotFoundError: No module named 'c'")
    )
    found = check_registry(reg)
    assert [m.id for m in found] == ["transforms.E002", "transforms.E001"]
    assert "pkg-a 1.0 (a:Good)" in found[0].msg and "pkg-b 2.0 (b:Good)" in found[0].msg
    assert "pkg-c 0.1" in found[1].msg and "No module named 'c'" in found[1].msg


def test_manage_py_check_fails_loudly():
    reg = registry.copy()
    reg.register(variant(config_schema={"type": "object", "properties": {"n": {"minimum": "one"}}}))
    with registry.swapped(reg), pytest.raises(SystemCheckError, match="transforms.E003"):
        call_command("check")
    call_command("check")  # and the real registry is clean again


def test_start_up_logs_problems_and_never_raises(caplog):
    from transforms.checks import log_problems

    reg = registry.copy()
    reg.problems.append(RegistryProblem("import", "pkg-x 1.0 (x:T)", "ImportError: boom"))
    reg.register(variant(name={"en": "No Chinese"}))
    with registry.swapped(reg):
        assert log_problems() == 2
    assert "transforms.E001: transform could not be loaded: pkg-x 1.0 (x:T): ImportError: boom" in caplog.text
    assert "transforms.E005" in caplog.text
    assert log_problems() == 0
