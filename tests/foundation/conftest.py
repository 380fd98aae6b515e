"""Fixtures for the foundation tests: a test-only transform registry, so these tests do not
depend on which built-in transforms exist while they are being written."""

from __future__ import annotations

import pytest

from transforms.base import ALL_SCOPES, NOT_FOR_KEYS, Transform
from transforms.registry import TransformRegistry, registry


class PrefixTransform(Transform):
    type_id = "test_prefix"
    aliases = ("old_prefix",)
    category = "prompt"
    name = {"en": "Test prefix", "zh": "测试前缀"}
    description = {"en": "Test only.", "zh": "仅测试。"}
    phases = ("request",)
    scopes = ALL_SCOPES
    config_schema = {
        "type": "object",
        "properties": {
            "content": {"type": "string", "minLength": 1},
            "position": {"enum": ["prepend", "append"], "default": "append"},
        },
        "required": ["content"],
        "additionalProperties": False,
    }


class RoutingTransform(Transform):
    """Stands in for a transform that is not offered for API keys."""

    type_id = "test_routing"
    category = "field"
    name = {"en": "Test routing", "zh": "测试路由"}
    description = {"en": "Test only.", "zh": "仅测试。"}
    phases = ("request", "response")
    scopes = NOT_FOR_KEYS


@pytest.fixture(autouse=True)
def test_registry():
    """Only the two test transforms, installed as the default registry for the test."""
    reg = TransformRegistry()
    reg.register(PrefixTransform)
    reg.register(RoutingTransform)
    with registry.swapped(reg):
        yield reg


@pytest.fixture
def run_on_commit(django_capture_on_commit_callbacks):
    """Run on-commit callbacks (config version bumps) inside the test transaction."""
    return django_capture_on_commit_callbacks
