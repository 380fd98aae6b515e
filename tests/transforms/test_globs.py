import pytest

from transforms.globs import any_glob, glob_match


@pytest.mark.parametrize(
    ("pattern", "name", "expected"),
    [
        ("gpt-4*", "gpt-4o", True),
        ("gpt-4*", "GPT-4o", False),
        ("gpt-4*", "xgpt-4", False),
        ("gpt-?", "gpt-5", True),
        ("gpt-?", "gpt-55", False),
        ("*", "", True),
        ("*", "anything", True),
        ("a*b*c", "aXXbYYc", True),
        ("a*b*c", "aXXbYY", False),
        ("[ab]", "a", False),
        ("[ab]", "[ab]", True),
        ("claude-*-4?", "claude-opus-45", True),
        ("x", "x\n", False),
        ("*", "line\nbreak", True),
        ("gpt-4o", "gpt-4o", True),
        ("gpt-4o", "gpt-4", False),
        ("", "", True),
        ("", "x", False),
        ("?", "?", True),
    ],
)
def test_glob_match(pattern, name, expected):
    assert glob_match(pattern, name) is expected


def test_glob_is_linear_on_pathological_input():
    assert glob_match("a*" * 50 + "b", "a" * 5000) is False


def test_any_glob_none_matches_all_and_empty_matches_nothing():
    assert any_glob(None, "m")
    assert not any_glob([], "m")
    assert any_glob(["x", "m*"], "model")
