"""Every registered transform's worked examples, run through the wire codecs."""

import pytest

from transforms.examples import check_example
from transforms.registry import registry

CASES = [
    pytest.param(cls, example, id=f"{type_id}[{i}]")
    for type_id, cls in registry.items()
    for i, example in enumerate(cls.examples)
]


@pytest.mark.parametrize(("cls", "example"), CASES)
def test_worked_example(cls, example):
    assert check_example(cls, example) == []


def test_every_registered_transform_declares_an_example():
    """An operator sees what a rule does before saving it: no transform without an example."""
    assert [type_id for type_id, cls in registry.items() if not cls.examples] == []
